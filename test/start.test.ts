// npm start on servers of its own choosing (MONGO_URL and TEMPORAL_ADDRESS set, so it starts none): the line that
// says where to look comes once the API answers there, so a README's next command never meets a refused connection.
import assert from 'node:assert/strict';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import { sourceEntryArgs } from '../scripts/sourceEntry';
import { deleteSweepSchedule, processStackVars } from './support/processStack';
import { startProcess, terminate } from './support/processes';
import { temporalClient } from './support/harness';
import { loadConfig } from '../config';
import { childProcessEnv } from './support/workerProcess';

describe('npm start', function () {
  this.timeout(180_000);

  it('prints the API line once the API answers GET /healthz there', async () => {
    const port = await freePort();
    const vars = processStackVars(
      { db: 't_start', queue: 'start' },
      { HOST: '127.0.0.1', PORT: String(port) },
    );
    const started = await startProcess(
      PROJECT_ROOT,
      sourceEntryArgs('scripts/start.ts'),
      childProcessEnv(vars),
      'flow-notify: API',
      150_000,
    );
    try {
      const line = /flow-notify: API\s+(http:\/\/\S+)/.exec(started.output());
      assert.ok(line, started.output());
      const answer = await fetch(`${line[1]}/healthz`).catch((err: Error) => err);
      assert.ok(!(answer instanceof Error), `GET /healthz right after the line: ${String(answer)}`);
      assert.equal(answer.status, 200);
    } finally {
      await terminate(started.child, 30_000);
      const { client, close } = await temporalClient(loadConfig(vars));
      await deleteSweepSchedule(client, vars.TEMPORAL_TASK_QUEUE).finally(close);
    }
  });
});
