import assert from 'node:assert/strict';
import { DEFAULT_EPISODE_OPTIONS } from '../../contract/workflows';
import { episodeLifetimeSeconds, sweepLookbackSeconds } from '../../domain/sweep';
import { loadConfig } from '../../config';
import { episodeOptions } from '../../client/emitter';
import { MISSED_RECIPIENTS_RETRY_SECONDS } from '../../domain/push';

describe("the sweep's reach", () => {
  const defaults = loadConfig({
    AUTH_JWT_SECRET: 'x'.repeat(32),
    MONGO_URL: 'mongodb://127.0.0.1:1/',
    TEMPORAL_ADDRESS: '127.0.0.1:1',
  });
  const life = { ...episodeOptions(defaults), opsAlertRetryHours: defaults.opsAlertRetryHours };

  it("follows an episode's longest life with the defaults: 34 h 0 min (docs/versioning.md)", () => {
    assert.equal(episodeLifetimeSeconds(life), 34 * 3600);
    assert.equal(sweepLookbackSeconds(life, defaults.sweepIntervalSeconds), 34 * 3600 + 240);
  });

  it("never looks back less than a push's day of retrying missed recipients, and grows with a longer schedule or operator retries", () => {
    const short = { callbackRetrySeconds: [1], opsAlertRetryHours: 1 };
    // The missed recipients' day, its last wait (an hour), an hour of quick calls, two sweep intervals.
    assert.equal(sweepLookbackSeconds(short, 120), MISSED_RECIPIENTS_RETRY_SECONDS + 2 * 3600 + 240);
    const longer = { ...life, callbackRetrySeconds: [...life.callbackRetrySeconds, 86_400] };
    assert.ok(sweepLookbackSeconds(longer, 120) > sweepLookbackSeconds(life, 120) + 86_400);
    assert.ok(episodeLifetimeSeconds({ ...life, opsAlertRetryHours: 72 }) >= 72 * 3600);
  });

  it("covers a team event's hand-off tried again after each wait, when its rounds outlast the callback's", () => {
    // Ten waits of 2.5 h: the callback's jittered waits and attempts come to 100,155 s; the hand-off's unjittered
    // waits and eleven rounds of quick calls through an outage (24 min each) to 105,873 s.
    const hours = {
      callbackRetrySeconds: Array(10).fill(9000),
      callbackRetryJitter: 0.1,
      callbackAttemptSeconds: 30,
    };
    assert.equal(episodeLifetimeSeconds({ ...hours, opsAlertRetryHours: 1 }), 90_000 + 11 * 1443 + 3600);
  });

  it('reads histories started without jitter or an attempt deadline as the worker ran them', () => {
    assert.ok(episodeLifetimeSeconds({ ...DEFAULT_EPISODE_OPTIONS, opsAlertRetryHours: 24 }) > 24 * 3600);
  });
});
