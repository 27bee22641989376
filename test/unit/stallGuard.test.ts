// failWhenStalled: a test that steps all along passes however long past mocha's timeout it runs; a stall fails it.
// Each case runs a one-test suite in a runner of its own, with a mocha timeout far shorter than the test.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import Mocha, { type Context } from 'mocha';
import { failWhenStalled } from '../support/stallGuard';

const MOCHA_TIMEOUT_MS = 100;
/** Far longer than any gap between two steps below, loaded machine or not. */
const ALLOWANCE_MS = 30_000;

/** Runs one test of `fn` with a mocha timeout of MOCHA_TIMEOUT_MS; resolves with its error, if it failed. */
function runAlone(fn: (this: Context) => Promise<void>): Promise<Error | undefined> {
  const suite = new Mocha.Suite('alone', new Mocha.Context());
  suite.timeout(MOCHA_TIMEOUT_MS);
  suite.addTest(new Mocha.Test('long', fn));
  const runner = new Mocha.Runner(suite, { delay: false, cleanReferencesAfterRun: true });
  let failure: Error | undefined;
  runner.on('fail', (_test, err: Error) => (failure ??= err));
  return new Promise((resolve) => runner.run(() => resolve(failure)));
}

/** Twenty steps, each after a wait: the test runs well past MOCHA_TIMEOUT_MS in all. */
async function stepAlong(stepped: () => void): Promise<void> {
  for (let i = 0; i < 20; i++) {
    await sleep(MOCHA_TIMEOUT_MS / 5);
    stepped();
  }
}

describe('failWhenStalled', () => {
  it("why it exists: mocha's timeout, set again at every step, still fails a test that ran past it", async () => {
    const failure = await runAlone(async function () {
      await stepAlong(() => void this.timeout(MOCHA_TIMEOUT_MS));
    });
    assert.match(String(failure), /Timeout of 100ms exceeded/);
  });

  it('passes a test that steps all along, however long it runs', async () => {
    const failure = await runAlone(async function () {
      await failWhenStalled(this, ALLOWANCE_MS, stepAlong);
    });
    assert.equal(failure, undefined);
  });

  it('fails a test once no step was done for the allowance, and says so', async () => {
    const failure = await runAlone(async function () {
      await failWhenStalled(this, 200, async (stepped) => {
        stepped('the only one');
        await new Promise<void>(() => undefined);
      });
    });
    assert.match(String(failure), /no step done for 0.2 s; the last: the only one/);
  });
});
