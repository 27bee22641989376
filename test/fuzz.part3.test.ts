// Bad input, part 3 of the route fuzzer (test/fuzz/suite.ts): its own FerretDB, side by side with the others.
import { describeFuzz } from './fuzz/suite';

describeFuzz(3);
