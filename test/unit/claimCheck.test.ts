// An attempt holds its claim again just before its request only when the claim could have gone stale: after a
// wait always, a first attempt once half the grace has passed since the claim was taken (no store trip before).
import assert from 'node:assert/strict';
import { claimCheck } from '../../activities/callback';

describe('claimCheck', () => {
  const graceMs = 300_000;
  const claimsAnswering = (held: boolean) => {
    const asked: string[] = [];
    return { asked, claims: { graceMs, renew: async (key: string) => (asked.push(key), held) } };
  };
  const place = (heldSince?: number) => ({
    attempt: 1,
    trigger: 'episode' as const,
    claim: {
      key: 'cb|run_1:end',
      holder: 'episode|run_1:end/a',
      ...(heldSince !== undefined ? { heldSince } : {}),
    },
  });

  it('a first attempt within half the grace of its claim asks nothing', async () => {
    const { asked, claims } = claimsAnswering(false);
    assert.equal(await claimCheck(claims, place(Date.now() - graceMs / 2 + 10_000))?.(), undefined);
    assert.deepEqual(asked, []);
  });

  it('a first attempt past half the grace holds the claim again, and stops on one taken over', async () => {
    const { asked, claims } = claimsAnswering(false);
    assert.deepEqual(await claimCheck(claims, place(Date.now() - graceMs / 2))?.(), {
      result: 'stop',
      detail: 'claimed elsewhere',
      claimedElsewhere: true,
    });
    assert.deepEqual(asked, ['cb|run_1:end']);
  });

  it('an attempt after a wait always holds the claim again; still held, it goes', async () => {
    const { asked, claims } = claimsAnswering(true);
    assert.equal(await claimCheck(claims, place())?.(), undefined);
    assert.deepEqual(asked, ['cb|run_1:end']);
  });

  it('without a claim, or without the store, there is nothing to check', () => {
    assert.equal(claimCheck(claimsAnswering(true).claims, { attempt: 1, trigger: 'episode' }), undefined);
    assert.equal(claimCheck(undefined, place()), undefined);
  });
});
