// Replay fixtures from suites that hold a history in hand (the time-skipping ones): saved as test/fixtures/<name>
// when RECORD_FIXTURES=1 (docs/versioning.md), in the JSON `temporal workflow show --output json` writes.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { PROJECT_ROOT } from '../../platform/embedded';

export function recordHistory(history: Parameters<typeof historyToJSON>[0], name: string): void {
  if (process.env.RECORD_FIXTURES === '1')
    writeFileSync(path.join(PROJECT_ROOT, 'test', 'fixtures', name), historyToJSON(history));
}
