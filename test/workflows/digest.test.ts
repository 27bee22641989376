// A person's digest on time-skipping Temporal: it waits on a durable timer until the person can be reached (quiet
// hours that cross midnight and daylight-saving switches, do-not-disturb cleared early), then sends once. The
// activities are stand-ins that compute what the real ones do from the same pure rules (domain/quietHours.ts);
// the suites on the dev server drive the real ones. The server's clock only moves forward (and leaps years ahead
// once a worker stops), so each case skips to the next date it needs: the next 22:30, the next switch night.
// What a digest sends (the person's owed holds, taken at the send) is the store's: test/digestHistory.test.ts.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities, DigestRef, DigestSend } from '../../contract/activities';
import { digestEntrySignal, prefsChangedSignal, type DigestEntry } from '../../contract/workflows';
import { heldUntil, type HoldPrefs } from '../../domain/quietHours';
import { digestWorkflow } from '../../workflows';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';
import { recordHistory } from '../support/historyFixture';

const night = (timeZone: string): HoldPrefs => ({
  quietHours: { start: '22:00', end: '07:00', timeZone },
  breakThrough: ['human_input_requested'],
});

describe('the digest on time-skipping Temporal', function () {
  this.timeout(180_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  /** The next `hh:mm` UTC on the server's clock, ISO. */
  async function nextUtc(hours: number, minutes: number): Promise<string> {
    const now = new Date(await env.currentTimeMs());
    const day = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
    const at = day + (hours * 60 + minutes) * 60_000;
    return new Date(at > now.getTime() + 60_000 ? at : at + 24 * 3600_000).toISOString();
  }

  /** Skips the server's clock to `iso` (it must lie ahead). */
  async function skipTo(iso: string): Promise<void> {
    const ahead = Date.parse(iso) - (await env.currentTimeMs());
    assert.ok(ahead > 0, `${iso} has passed on the test server`);
    await env.sleep(ahead);
  }

  /**
   * One digest: `prefs` are what the person's prefs say now (the stand-in reads them at each call), `entries` are
   * held at the server's now; `meanwhile` runs once the digest waits. Answers what was sent, and when.
   */
  async function runDigest(
    name: string,
    prefs: { current: HoldPrefs },
    entries: (nowMs: number) => DigestEntry[],
    meanwhile: (
      signal: () => Promise<void>,
      hold: (entry: DigestEntry) => Promise<void>,
    ) => Promise<void> = async () => undefined,
    /**
     * How each send goes, in turn (the last repeats): a device took it, none did, or some did while another's push
     * service failed (`partial`, then `still missing` for a try that reached none of the rest, `the rest`).
     */
    sends: Array<'delivered' | 'failed' | 'no device' | 'partial' | 'still missing' | 'the rest'> = [
      'delivered',
    ],
    /**
     * Reads of the prefs that fail first (the store away; each failure retried at once), from the send
     * `afterSends` on (0: from the start).
     */
    storeAway: { prefsReads: number; afterSends?: number } = { prefsReads: 0 },
  ) {
    const sent: Array<{ atMs: number; digest: DigestSend }> = [];
    const settled: string[] = [];
    const gaveUp: string[] = [];
    const activities = {
      tryMark: async () => true,
      markDelivered: async (key: string, _holder: string, result?: string) =>
        void settled.push(`${key}=${result}`),
      giveUpDigest: async ({ digestId }: DigestRef) => void gaveUp.push(digestId),
      digestReleaseAt: async () => {
        if (sent.length >= (storeAway.afterSends ?? 0) && storeAway.prefsReads > 0 && storeAway.prefsReads--)
          throw ApplicationFailure.create({ message: 'the store is away', nextRetryDelay: 1 });
        return heldUntil(prefs.current, 'digest', new Date(await env.currentTimeMs()))?.getTime();
      },
      sendDigest: async (digest: DigestSend) => {
        sent.push({ atMs: await env.currentTimeMs(), digest });
        const how = sends[Math.min(sent.length - 1, sends.length - 1)];
        if (how === 'no device') return { addressable: false, reason: 'no subscription' };
        const [delivered, alreadyDelivered, retryable] = {
          delivered: [1, 0, 0],
          failed: [0, 0, 1],
          partial: [1, 0, 1],
          'still missing': [0, 1, 1],
          'the rest': [1, 1, 0],
        }[how];
        return {
          addressable: true,
          attempted: delivered + retryable,
          delivered,
          alreadyDelivered,
          pruned: 0,
          failed: retryable,
          retryable,
        };
      },
    } as unknown as Partial<Activities>;
    const taskQueue = `ts-digest-${name}`;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    const nowMs = await env.currentTimeMs();
    const [first, ...rest] = entries(nowMs);
    const result = await worker.runUntil(async () => {
      const handle = await env.client.workflow.signalWithStart(digestWorkflow, {
        workflowId: `digest|acme|${name}`,
        taskQueue,
        args: [{ teamId: 'acme', userId: name }],
        signal: digestEntrySignal,
        signalArgs: [first],
      });
      for (const entry of rest) await handle.signal(digestEntrySignal, entry);
      await meanwhile(
        () => handle.signal(prefsChangedSignal),
        (entry) => handle.signal(digestEntrySignal, entry),
      );
      const done = await handle.result();
      const history = await handle.fetchHistory();
      // A digest that missed a device hands it to its own workflow, which outlives this one.
      for (const event of history.events ?? []) {
        const child = event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
        if (child) await env.client.workflow.getHandle(child).result();
      }
      return { done, history };
    });
    return { result: result.done, history: result.history, sent, settled, gaveUp, startedMs: nowMs };
  }

  const entry = (nowMs: number, n: number, extra: Partial<DigestEntry> = {}): DigestEntry => ({
    episodeId: `run_${n}:end`,
    runId: `run_${n}`,
    kind: 'run_finished',
    title: `Run ${n}`,
    at: new Date(nowMs + n * 1000).toISOString(),
    releaseAt: new Date(nowMs).toISOString(),
    reason: 'quiet',
    ...extra,
  });

  /** Held now for a person with these prefs: released when heldUntil says. */
  const heldNow = (prefs: HoldPrefs, nowMs: number, n: number, kind = 'run_failed'): DigestEntry =>
    entry(nowMs, n, {
      kind,
      releaseAt: heldUntil(prefs, kind, new Date(nowMs))!.toISOString(),
    });

  it('a window crossing midnight: held at 22:30, sent once at 07:00 the next morning', async () => {
    const heldAt = await nextUtc(22, 30);
    await skipTo(heldAt);
    const prefs = { current: night('UTC') };
    const run = await runDigest('midnight', prefs, (now) => [
      heldNow(prefs.current, now, 1),
      heldNow(prefs.current, now, 2, 'run_finished'),
      heldNow(prefs.current, now, 1), // the same episode again (a retried fan-out): once
    ]);
    assert.equal(run.sent.length, 1);
    const [{ atMs, digest }] = run.sent;
    const morning = Date.parse(heldAt) + 8.5 * 3600_000;
    assert.ok(atMs >= morning && atMs < morning + 60_000, new Date(atMs).toISOString());
    // What it sends is taken from the store at the send: the workflow hands over no list, whatever it held.
    assert.deepEqual(Object.keys(digest).sort(), ['digestId', 'tag', 'teamId', 'userId']);
    assert.equal(digest.tag, 'digest|acme|midnight');
    assert.match(
      digest.digestId,
      /^digest\|digest\|acme\|midnight\|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.1$/,
    );
    assert.deepEqual(run.settled, [`${digest.digestId}=delivered`]);
    assert.deepEqual(run.result, { sent: 1 });
  });

  it('do-not-disturb cleared early: the digest goes out then, not at the old end', async () => {
    const now = await env.currentTimeMs();
    const prefs: { current: HoldPrefs } = {
      current: { doNotDisturbUntil: new Date(now + 5 * 3600_000), breakThrough: [] },
    };
    const run = await runDigest(
      'dnd',
      prefs,
      (at) => [heldNow(prefs.current, at, 1)],
      async (prefsChanged) => {
        await env.sleep(3600_000);
        prefs.current = { breakThrough: [] }; // PUT doNotDisturbUntil: null
        await prefsChanged();
      },
    );
    assert.equal(run.sent.length, 1);
    const after = run.sent[0].atMs - run.startedMs;
    assert.ok(after >= 3600_000 && after < 3600_000 + 60_000, `sent ${after / 1000} s after the hold`);
  });

  it('do-not-disturb cleared early, then a push held under the old prefs: the digest still goes out at the clearing', async () => {
    const now = await env.currentTimeMs();
    const oldEnd = new Date(now + 5 * 3600_000);
    const prefs: { current: HoldPrefs } = { current: { doNotDisturbUntil: oldEnd, breakThrough: [] } };
    const run = await runDigest(
      'dnd-stale',
      prefs,
      (at) => [heldNow(prefs.current, at, 1)],
      async (prefsChanged, hold) => {
        await env.sleep(3600_000);
        prefs.current = { breakThrough: [] }; // PUT doNotDisturbUntil: null
        await prefsChanged();
        // A fan-out that read the prefs before the PUT holds its push until the old end.
        const at = await env.currentTimeMs();
        await hold(entry(at, 2, { releaseAt: oldEnd.toISOString() }));
      },
    );
    recordHistory(run.history, 'digest-history-stale-entry-reread.json');
    // Both go out at the clearing (in one digest or two), none at the old end.
    const after = run.sent.map((sent) => (sent.atMs - run.startedMs) / 3600_000);
    assert.ok(
      after.length >= 1 && after.every((h) => h >= 1 && h < 1 + 1 / 60),
      `sent ${after} h after the hold`,
    );
  });

  it('a digest no device took is sent again, 5 minutes later then doubling; one that never goes through gives up after a day', async () => {
    const prefs = { current: { breakThrough: [] } as HoldPrefs };
    const burst = (at: number) => [
      entry(at, 1, { reason: 'burst', releaseAt: new Date(at + 600_000).toISOString() }),
    ];
    const back = await runDigest('retried', prefs, burst, undefined, ['failed', 'failed', 'delivered']);
    // Each gap is its wait plus the real time the worker took between the timer and the send (the server's clock
    // runs while an activity does: a second and more on a loaded machine), never a wait of the next size.
    const gaps = back.sent.slice(1).map((s, i) => s.atMs - back.sent[i].atMs);
    assert.equal(gaps.length, 2, `gaps ${gaps}`);
    [300_000, 600_000].forEach((wait, i) =>
      assert.ok(
        gaps[i] >= wait && gaps[i] < wait + 60_000,
        `gap ${i + 1}: ${gaps[i] / 1000} s, waited ${wait / 1000}`,
      ),
    );
    assert.equal(back.settled.length, 1);
    assert.match(back.settled[0], /=delivered$/);
    assert.deepEqual(back.gaveUp, []);

    const never = await runDigest('never', prefs, burst, undefined, ['failed']);
    const span = never.sent.at(-1)!.atMs - never.sent[0].atMs;
    assert.ok(span <= 24 * 3600_000 && span > 23 * 3600_000, `tried for ${span / 3600_000} h`);
    assert.ok(never.sent.length < 30, `${never.sent.length} sends`);
    assert.deepEqual(never.settled.length, 1);
    assert.match(never.settled[0], /=failed$/);
    // Its holds are told, before its claim settles: they gave up, visibly (the episodes view, explain, a metric).
    assert.deepEqual(never.gaveUp, [never.sent[0].digest.digestId]);

    // A person with no device left: given up at once (the sweep would offer the holds again every day).
    const gone = await runDigest('gone', prefs, burst, undefined, ['no device']);
    assert.equal(gone.sent.length, 1);
    assert.deepEqual(gone.gaveUp, [gone.sent[0].digest.digestId]);
    assert.match(gone.settled[0], /=not_addressable: no subscription$/);
  });

  it('a digest no device took just before quiet hours is not tried again inside them: sent at their end', async () => {
    const failedAt = await nextUtc(21, 50);
    await skipTo(failedAt);
    const prefs = { current: night('UTC') };
    const due = (at: number) => [entry(at, 1, { reason: 'burst', releaseAt: new Date(at).toISOString() })];
    const run = await runDigest('into-quiet', prefs, due, undefined, ['failed', 'failed', 'delivered']);
    recordHistory(run.history, 'digest-history-retry-waits-for-quiet.json');
    const quietFrom = Date.parse(failedAt) + 10 * 60_000;
    const morning = quietFrom + 9 * 3600_000;
    const times = run.sent.map((s) => new Date(s.atMs).toISOString());
    assert.equal(run.sent.length, 3, `${times}`);
    assert.deepEqual(
      run.sent
        .filter((s) => s.atMs >= quietFrom && s.atMs < morning)
        .map((s) => new Date(s.atMs).toISOString()),
      [],
      'tried again inside quiet hours',
    );
    assert.ok(run.sent[2].atMs < morning + 60_000, `sent at ${times[2]}, not at 07:00`);
    assert.match(run.settled[0], /=delivered$/);
  });

  it('a store away longer than its quick retries when the digest is due holds it back, and it is still sent once', async () => {
    const prefs = { current: { breakThrough: [] } as HoldPrefs };
    const due = (at: number) => [entry(at, 1, { reason: 'burst', releaseAt: new Date(at).toISOString() })];
    const run = await runDigest('store-away', prefs, due, undefined, ['delivered'], { prefsReads: 25 });
    recordHistory(run.history, 'digest-history-store-outage-outlasted.json');
    assert.equal(run.sent.length, 1);
    assert.match(run.settled[0], /=delivered$/);
    assert.deepEqual(run.result, { sent: 1 });
  });

  it('a store away longer than its quick retries when a digest no device took is tried again: it goes out', async () => {
    const prefs = { current: { breakThrough: [] } as HoldPrefs };
    const due = (at: number) => [entry(at, 1, { reason: 'burst', releaseAt: new Date(at).toISOString() })];
    const run = await runDigest('store-away-retry', prefs, due, undefined, ['failed', 'delivered'], {
      prefsReads: 25,
      afterSends: 1,
    });
    recordHistory(run.history, 'digest-history-retry-store-outage-outlasted.json');
    assert.equal(run.sent.length, 2);
    assert.match(run.settled[0], /=delivered$/);
    assert.deepEqual(run.gaveUp, []);
  });

  it('a burst that ends inside quiet hours waits for their end', async () => {
    const burstAt = await nextUtc(21, 55); // quiet hours (UTC) begin at 22:00
    await skipTo(burstAt);
    const prefs = { current: { ...night('UTC'), breakThrough: [] } as HoldPrefs };
    const run = await runDigest('burst-into-night', prefs, (at) => [
      entry(at, 1, { reason: 'burst', releaseAt: new Date(at + 600_000).toISOString() }),
    ]);
    recordHistory(run.history, 'digest-history-whole-run-id.json');
    assert.equal(run.sent.length, 1);
    const morning = Date.parse(burstAt) + (9 * 60 + 5) * 60_000;
    const at = run.sent[0].atMs;
    assert.ok(at >= morning && at < morning + 60_000, new Date(at).toISOString());
  });

  it('a burst that ends inside quiet hours, then do-not-disturb past their end whose signal was lost: sent when it ends', async () => {
    const burstAt = await nextUtc(21, 55);
    await skipTo(burstAt);
    const prefs = { current: { ...night('UTC'), breakThrough: [] } as HoldPrefs };
    const morning = Date.parse(burstAt) + (9 * 60 + 5) * 60_000;
    const run = await runDigest(
      'burst-then-unsignalled-dnd',
      prefs,
      (at) => [entry(at, 1, { reason: 'burst', releaseAt: new Date(at + 600_000).toISOString() })],
      async () => {
        // Past the burst's release (the digest read the prefs then: quiet until 07:00), in the night, the person
        // turns do-not-disturb on until 09:00; the API's signal to the digest is lost (Temporal away).
        await env.sleep('3 hours');
        prefs.current = { ...prefs.current, doNotDisturbUntil: new Date(morning + 2 * 3600_000) };
      },
    );
    recordHistory(run.history, 'digest-history-reads-prefs-at-every-release.json');
    assert.equal(run.sent.length, 1);
    const at = run.sent[0].atMs;
    assert.ok(
      at >= morning + 2 * 3600_000 && at < morning + 2 * 3600_000 + 60_000,
      new Date(at).toISOString(),
    );
  });

  /** The n-th Sunday of a month (n < 0: its last), as UTC midnight of that date. */
  const sunday = (year: number, month: number, n: number): number => {
    if (n > 0) {
      const first = Date.UTC(year, month, 1);
      return first + (((7 - new Date(first).getUTCDay()) % 7) + (n - 1) * 7) * 24 * 3600_000;
    }
    const last = Date.UTC(year, month + 1, 0);
    return last - new Date(last).getUTCDay() * 24 * 3600_000;
  };
  const H = 3600_000;
  // [name, zone, the switch's Sunday in a year, when held (22:30 local the night before), 07:00 local after it]
  const dstCases: Array<[string, string, (year: number) => number, number, number]> = [
    // New York: 2nd Sunday of March (EST to EDT) and 1st of November (EDT to EST), as on 2026-03-08 and 2026-11-01.
    ['us-spring', 'America/New_York', (y) => sunday(y, 2, 2), 3.5 * H, 11 * H],
    ['us-fall', 'America/New_York', (y) => sunday(y, 10, 1), 2.5 * H, 12 * H],
    // Berlin: last Sunday of March (CET to CEST) and of October (CEST to CET), as on 2026-03-29 and 2026-10-25.
    ['eu-spring', 'Europe/Berlin', (y) => sunday(y, 2, -1), -2.5 * H, 5 * H],
    ['eu-fall', 'Europe/Berlin', (y) => sunday(y, 9, -1), -3.5 * H, 6 * H],
  ];
  for (const [name, zone, switchDay, heldOffset, endOffset] of dstCases) {
    it(`a daylight-saving switch inside the window (${zone}, ${name}): sent at 07:00 local`, async () => {
      const now = await env.currentTimeMs();
      let year = new Date(now).getUTCFullYear();
      while (switchDay(year) + heldOffset <= now + 60_000) year++;
      const heldAt = new Date(switchDay(year) + heldOffset).toISOString();
      const end = new Date(switchDay(year) + endOffset).toISOString();
      await skipTo(heldAt);
      const prefs = { current: night(zone) };
      const run = await runDigest(name, prefs, (now) => [heldNow(prefs.current, now, 1)]);
      assert.equal(run.sent.length, 1);
      const at = run.sent[0].atMs;
      assert.ok(
        at >= Date.parse(end) && at < Date.parse(end) + 60_000,
        `${new Date(at).toISOString()}, not ${end}`,
      );
    });
  }

  // Temporal's time-skipping test server stops skipping time for whatever runs after a child that outlived its
  // parent (the resend outlives its digest), so this case has a server of its own (mocha runs it after the rest).
  describe('a digest that missed a device', () => {
    onTimeSkipping((started) => (env = started));

    it("a digest that reached one device while another's push service failed tries that one again, 5 minutes later then doubling, until it takes it", async () => {
      const prefs = { current: { breakThrough: [] } as HoldPrefs };
      const burst = (at: number) => [
        entry(at, 1, { reason: 'burst', releaseAt: new Date(at + 600_000).toISOString() }),
      ];
      const run = await runDigest('partial', prefs, burst, undefined, [
        'partial',
        'still missing',
        'the rest',
      ]);
      recordHistory(run.history, 'digest-history-partial-resent.json');
      // The digest settles at once (a device took it) and goes on with the next; the device it missed is tried
      // again under the same digest id (its sends skip the devices reached).
      const [{ digest }] = run.sent;
      assert.deepEqual(run.settled, [`${digest.digestId}=delivered`]);
      assert.deepEqual(
        run.sent.map((s) => s.digest.digestId),
        [digest.digestId, digest.digestId, digest.digestId],
      );
      const gaps = run.sent.slice(1).map((s, i) => s.atMs - run.sent[i].atMs);
      [300_000, 600_000].forEach((wait, i) =>
        assert.ok(gaps[i] >= wait && gaps[i] < wait + 60_000, `gap ${i + 1}: ${gaps[i] / 1000} s`),
      );
      assert.deepEqual(run.gaveUp, []);
    });
  });
});
