// The push_holds store on the real MongoDB-wire server. What the reaper keeps (every owed row, however old), what
// a start-up migration marks owed, and what a digest takes:
// driven through seeded random histories of holds, takes, sends, give-ups, offers and time passing, the take takes
// exactly the rows the definition of owed names (the oracle: the same collection read with that definition just
// before each take). The take may read by whatever marks a row owed; what it takes must not change.
import assert from 'node:assert/strict';
import type { Filter } from 'mongodb';
import { ensureAllIndexes } from '../store';
import { connectMongo, type Mongo } from '../store/mongo';
import {
  createPushHoldStore,
  migrateOwedHolds,
  pushHoldIndexes,
  type PushHoldRow,
} from '../store/push/holds';
import { random } from './support/seeded';
import { testConfig } from './support/stack';

const SEED = Number(process.env.PUSH_HOLDS_SEED ?? 20261206);
const HISTORIES = 12;
const STEPS = 60;

/**
 * Owed, as the store documents it: held, no digest a device took went out with it, none gave up on it, and the
 * person did not opt out of it.
 */
const owedOracle = (teamId: string, userId: string, now: Date): Filter<PushHoldRow> => ({
  teamId,
  userId,
  at: { $lte: now },
  digestSentAt: { $exists: false },
  digestGaveUpAt: { $exists: false },
  optedOutAt: { $exists: false },
  // Taken by no digest, or by one that has stopped trying.
  $or: [{ digestId: { $exists: false } }, { takenUntil: { $lte: now } }],
});

describe('push holds (push_holds): owed, taken, reaped', function () {
  this.timeout(120_000);
  let mongo: Mongo;

  before(async () => {
    const config = testConfig();
    mongo = await connectMongo(config.mongoUrl, config.mongoDb);
    await ensureAllIndexes(mongo.db);
  });
  after(() => mongo?.client.close());

  it('the reaper keeps a hold while it is owed, however old; a settled one goes 30 days after it was settled', async () => {
    const holds = createPushHoldStore(mongo.db);
    const teamId = `team_reaped_${SEED}`;
    const day = 24 * 3600_000;
    const t0 = new Date('2026-10-01T08:00:00Z');
    const at = (days: number) => new Date(t0.getTime() + days * day);
    const hold = (userId: string, n: number) =>
      holds.hold([
        {
          episodeId: `run_r${n}:end`,
          runId: `run_r${n}`,
          teamId,
          userId,
          kind: 'run_failed',
          title: 'r',
          reason: 'quiet',
          at: t0,
          releaseAt: t0,
        },
      ]);
    // Owed all along: a person under do-not-disturb renewed for over a month.
    await hold('owed', 1);
    // Taken by a digest a device took at once; and by one that gave up after its day.
    await hold('sent', 2);
    await holds.take(teamId, 'sent', `digest|${teamId}|sent`, at(0));
    await holds.markDigestSent(`digest|${teamId}|sent`, at(0));
    await hold('gave_up', 3);
    await holds.take(teamId, 'gave_up', `digest|${teamId}|gave_up`, at(0));
    await holds.markDigestGaveUp(`digest|${teamId}|gave_up`, at(1));
    // Settled late, after 20 days owed: the views still show it for 30 days after that.
    await hold('late', 4);
    await holds.take(teamId, 'late', `digest|${teamId}|late`, at(20));
    await holds.markDigestSent(`digest|${teamId}|late`, at(20));

    await holds.reapExpired(at(35));
    const left = await mongo.db
      .collection<PushHoldRow>('push_holds')
      .find({ teamId })
      .map((row) => row.userId)
      .toArray();
    assert.deepEqual(left.sort(), ['late', 'owed']);
    const [owed] = await holds.listForEpisode('run_r1:end', 10);
    await holds.take(teamId, 'owed', `digest|${teamId}|owed`, at(35));
    assert.equal((await holds.contentsOf(`digest|${teamId}|owed`, 10)).total, 1, JSON.stringify(owed));
  });

  it('a hold written before owedAt existed, still owed, is owed after the start-up migration: taken and kept', async () => {
    const holds = createPushHoldStore(mongo.db);
    const rows = mongo.db.collection<PushHoldRow>('push_holds');
    const teamId = `team_legacy_${SEED}`;
    const at = new Date('2026-11-20T08:00:00Z');
    const legacy = (userId: string, extra: Partial<PushHoldRow> = {}) => ({
      _id: `run_legacy:end|${userId}`,
      episodeId: 'run_legacy:end',
      runId: 'run_legacy',
      teamId,
      userId,
      kind: 'run_failed',
      title: 'legacy',
      reason: 'quiet' as const,
      at,
      releaseAt: at,
      ...extra,
    });
    await rows.insertMany([legacy('owed'), legacy('sent', { digestId: 'digest|old', digestSentAt: at })]);
    await ensureAllIndexes(mongo.db);
    const migrated = await rows.find({ teamId }).toArray();
    assert.ok(migrated.find((row) => row.userId === 'owed')?.owedAt, JSON.stringify(migrated));
    assert.equal(migrated.find((row) => row.userId === 'sent')?.owedAt, undefined);
    await holds.take(teamId, 'owed', `digest|${teamId}|owed`, new Date());
    assert.equal((await holds.contentsOf(`digest|${teamId}|owed`, 10)).total, 1);
    await holds.reapExpired(new Date(at.getTime() + 365 * 24 * 3600_000));
    assert.deepEqual(
      (await rows.find({ teamId }).toArray()).map((row) => row.userId),
      ['owed'],
    );
  });

  it('expires rows where the server keeps TTL indexes only by a time a settled row carries (an owed row has none)', () => {
    const ttl = pushHoldIndexes.filter((index) => index.options.expireAfterSeconds !== undefined);
    assert.ok(ttl.length > 0);
    for (const index of ttl)
      assert.ok(
        Object.keys(index.key).every((field) =>
          ['digestSentAt', 'digestGaveUpAt', 'optedOutAt'].includes(field),
        ),
        JSON.stringify(index),
      );
  });

  for (let h = 0; h < HISTORIES; h++) {
    it(`takes exactly the person's owed rows, history ${h} (seed ${SEED + h})`, async () => {
      const rand = random(SEED + h);
      const pick = <T>(items: T[]): T => items[Math.floor(rand() * items.length)];
      const holds = createPushHoldStore(mongo.db);
      const rows = mongo.db.collection<PushHoldRow>('push_holds');
      const teamId = `team_h${h}_${SEED}`;
      const people = ['ann', 'bob'];
      let clock = new Date('2026-12-01T08:00:00Z');
      let episodes = 0;
      const digests: string[] = [];
      const ids = async (filter: Filter<PushHoldRow>) =>
        (await rows.find({ ...filter, teamId }, { projection: { _id: 1 } }).toArray())
          .map((r) => r._id)
          .sort();
      const someIds = async () => (await ids({})).filter(() => rand() < 0.3);
      let takes = 0;
      let optedOutSettled = 0;

      for (let step = 0; step < STEPS; step++) {
        const roll = rand();
        if (roll < 0.3) {
          const userId = pick(people);
          const episodeId = `run_${h}_${++episodes}:end`;
          const releaseAt = new Date(clock.getTime() + pick([0, 600, 7200]) * 1000);
          await holds.hold([
            {
              episodeId,
              runId: `run_${h}_${episodes}`,
              teamId,
              userId,
              kind: pick(['run_finished', 'run_failed']),
              title: 't',
              reason: pick(['quiet', 'burst']),
              at: clock,
              releaseAt,
              ...(rand() < 0.5 ? { viaTeam: true as const } : {}),
            },
          ]);
        } else if (roll < 0.5) {
          const userId = pick(people);
          // Mostly a new digest; sometimes a retry of one that took already (it takes nothing more).
          const digestId =
            digests.length && rand() < 0.2 ? pick(digests) : `digest|${teamId}|${userId}|${digests.length}`;
          const before = await ids({ digestId });
          const expected = before.length ? before : await ids(owedOracle(teamId, userId, clock));
          await holds.take(teamId, userId, digestId, clock);
          if (!digests.includes(digestId)) digests.push(digestId);
          assert.deepEqual(
            await ids({ digestId }),
            expected,
            `step ${step}: ${digestId} at ${clock.toISOString()}`,
          );
          takes++;
        } else if (roll < 0.59) {
          // The person opted out of a kind, or of teammates' runs: exactly those of their owed rows no digest
          // is carrying are settled.
          const userId = pick(people);
          const optedOut = pick([
            { kinds: ['run_failed'], viaTeam: false },
            { kinds: [], viaTeam: true },
            { kinds: ['run_failed'], viaTeam: true },
          ]);
          const which = [
            ...(optedOut.kinds.length ? [{ kind: { $in: optedOut.kinds } }] : []),
            ...(optedOut.viaTeam ? [{ viaTeam: true as const }] : []),
          ];
          const settledBefore = await ids({ optedOutAt: { $exists: true } });
          const expected = which.length
            ? await ids({ $and: [owedOracle(teamId, userId, clock), { $or: which }] })
            : [];
          await holds.settleOptedOut(teamId, userId, optedOut, clock);
          const settled = (await ids({ optedOutAt: { $exists: true } })).filter(
            (id) => !settledBefore.includes(id),
          );
          assert.deepEqual(
            settled,
            expected,
            `step ${step}: ${userId} opted out of ${JSON.stringify(optedOut)}`,
          );
          optedOutSettled += settled.length;
        } else if (roll < 0.61) {
          await migrateOwedHolds(mongo.db, clock);
        } else if (roll < 0.68 && digests.length) {
          await holds.markDigestSent(pick(digests), clock);
        } else if (roll < 0.72 && digests.length) {
          await holds.markDigestGaveUp(pick(digests), clock);
        } else if (roll < 0.77) {
          await holds.markSent(await someIds(), `digest|${teamId}|listed|${step}`, clock);
        } else if (roll < 0.85) {
          await holds.deferOffer(await someIds(), new Date(clock.getTime() + 3600_000));
        } else {
          clock = new Date(clock.getTime() + pick([60, 3600, 25 * 3600, 27 * 3600]) * 1000);
        }
      }
      assert.ok(takes > 5, `only ${takes} takes in ${STEPS} steps`);
      assert.ok(optedOutSettled > 0, 'no opt-out in the history settled anything: it tested nothing');
      assert.ok(
        (await ids({ digestId: { $exists: true } })).length > 0,
        'no take in the history took anything: it tested nothing',
      );
    });
  }
});
