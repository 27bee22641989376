// The package's main entry exposes the outbound guard and the emitters to other services.
import assert from 'node:assert/strict';
import * as entry from '../index';

describe('package entry', () => {
  it('exports checkCallbackTarget, which refuses a loopback callback in strict mode with its reason', async () => {
    await assert.rejects(entry.checkCallbackTarget('http://127.0.0.1/hook'), (err: unknown) => {
      assert.ok(err instanceof entry.TargetRefusedError);
      assert.match(err.reason, /private or reserved/);
      return true;
    });
    const ok = await entry.checkCallbackTarget('https://hooks.example.com/x', {
      lookup: async () => [{ address: '93.184.216.34', family: 4 }],
    });
    assert.equal(ok.address, '93.184.216.34');
  });

  it('exports the emitters and the outcome spine', () => {
    for (const name of [
      'buildRunOutcome',
      'runOutcomeEventId',
      'createOutcomeEmitter',
      'emitFromRunner',
      'notifyOperator',
    ]) {
      assert.equal(typeof (entry as Record<string, unknown>)[name], 'function', name);
    }
  });
});
