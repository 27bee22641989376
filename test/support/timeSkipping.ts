// Temporal's time-skipping test server, for workflow logic whose timers are long. The SDK would download its
// binary from outside; scripts/install.sh fetches the Java build from Maven Central instead (tools/test-server),
// and the SDK starts it as an existing executable.
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { PROJECT_ROOT } from '../../stack/embedded';

export const TEST_SERVER_PATH = path.join(PROJECT_ROOT, 'tools', 'test-server', 'temporal-test-server');

export function timeSkippingEnvironment(): Promise<TestWorkflowEnvironment> {
  return TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: TEST_SERVER_PATH } },
  });
}
