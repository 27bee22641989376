// The push suites' system: the loopback push service, a family stack whose worker and API push to it (VAPID keys of
// its own), and the team's people with their devices subscribed.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import webpush from 'web-push';
import type { Metrics } from '../../platform/metrics';
import { createLogger } from '../../platform/log';
import { startFamilyStack, type FamilyStack } from './familyStack';
import type { ApiClient } from './harness';
import { startPushService, type PushService, type SubscriptionJSON } from './pushService';
import { TEST_PUSH_BURST_LIMIT } from './stack';

export interface PushStack extends FamilyStack {
  push: PushService;
}

export interface PushStackOptions {
  /** Settings over the push suites' own (the sweep hourly, the suites' burst limit). */
  vars?: Record<string, string>;
  /** Every line the worker and the API log, the API at its most talkative (a debug line per request). */
  logged?: string[];
  /** The API's metrics. */
  apiMetrics?: Metrics;
  /** Temporal's activity retry backoff a tenth as long (support/fastRetries.ts). */
  fastRetries?: boolean;
}

/** The push service, then the stack; stop() stops both. */
export async function startPushStack(options: PushStackOptions = {}): Promise<PushStack> {
  const { logged, apiMetrics } = options;
  const push = await startPushService();
  const vapid = webpush.generateVAPIDKeys();
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged?.push(chunk.toString());
      done();
    },
  });
  const log = (line: string) => logged?.push(line);
  const stack = await startFamilyStack(
    {
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:ops@flow.test',
      PUSH_ALLOW_PRIVATE: '1',
      SWEEP_INTERVAL_SECONDS: '3600',
      PUSH_BURST_LIMIT: TEST_PUSH_BURST_LIMIT,
      ...options.vars,
    },
    {
      push,
      fastRetries: options.fastRetries,
      ...(logged ? { workerLog: log } : {}),
      api: {
        ...(logged
          ? { log, logger: createLogger({ level: 'debug', format: 'json', name: 'api', destination }) }
          : {}),
        ...(apiMetrics ? { metrics: apiMetrics } : {}),
      },
    },
  ).catch(async (err) => {
    await push.close();
    throw err;
  });
  const stop = async () => {
    await stack.stop();
    await push.close();
  };
  return { ...stack, push, stop };
}

/** Each person's devices (named <person><i>), subscribed in team acme; the devices by person. */
export async function subscribeDevices(
  stack: PushStack,
  devicesPerPerson: Record<string, number>,
): Promise<Record<string, SubscriptionJSON[]>> {
  const devices: Record<string, SubscriptionJSON[]> = {};
  for (const [person, count] of Object.entries(devicesPerPerson)) {
    devices[person] = [];
    for (let i = 0; i < count; i++) {
      const subscription = stack.push.endpoint(`${person}${i}`);
      const res = await stack.anonymous
        .as(person, 'acme')
        .post('/api/v1/notifications/push/subscriptions', subscription);
      assert.equal(res.status, 201, res.text);
      devices[person].push(subscription);
    }
  }
  return devices;
}

/** The push suites' team: alice (who runs things) with two devices, bob with one and the team's scope. */
export async function subscribeTeam(
  stack: PushStack,
): Promise<{ alice: ApiClient; bob: ApiClient; devices: Record<string, SubscriptionJSON[]> }> {
  const devices = await subscribeDevices(stack, { alice: 2, bob: 1 });
  const alice = stack.anonymous.as('alice', 'acme');
  const bob = stack.anonymous.as('bob', 'acme');
  assert.equal((await bob.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
  return { alice, bob, devices };
}
