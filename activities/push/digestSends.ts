// Digest sends: one push to every device of a person, listing the pushes held for them, recorded as an episode's
// push is; and the digest that no device took, given up.
import type { DigestRef, DigestSend, DigestSendResult } from '../../contract/activities';
import { DIGEST_MAX_LISTED, type DigestEntry } from '../../contract/workflows';
import { episodeOfStatus } from '../../domain/outcome';
import { DIGEST_CLOSED_KIND, renderDigest } from '../../domain/push';
import { heldUntil } from '../../domain/quietHours';
import { digestEntryOf, holdId, type DigestContents, type PushHoldStore } from '../../store/push/holds';
import type { PushSubscriptionRow } from '../../store/push/subscriptions';
import { PREF_KINDS, type NotificationPrefs } from '../../store/push/notificationPrefs';
import type { PushActivityDeps } from './pushActivityDeps';
import { attemptStartedAt, keptAlive } from '../activityContext';
import { configFaultReporter, sendRecorded, STORE_WORK_BEATS_FOR_MS, type Reached } from './recordedSends';

/** When the person can be reached by a digest now: undefined for now (epoch ms otherwise). */
export async function digestReleaseAt(
  deps: PushActivityDeps,
  teamId: string,
  userId: string,
): Promise<number | undefined> {
  const now = deps.now();
  return heldUntil(await deps.notificationPrefs.get(userId, teamId, now), 'digest', now)?.getTime();
}

/**
 * One digest to every device of the person, recorded as an episode's push is (a retry, or a worker killed
 * mid-send, repeats nothing already sent). It sends the person's owed holds, taken at its first send, less those
 * they opted out of since they were held; once a device took it they are no longer owed.
 */
export async function sendDigest(deps: PushActivityDeps, digest: DigestSend): Promise<DigestSendResult> {
  attemptStartedAt(); // its fan-out's time is counted from here
  if (!deps.sender) return { addressable: false, reason: 'no sink' };
  if (digest.episodeIds) return sendListedDigest(deps, digest, digest.episodeIds);
  const holds = deps.digests?.pushHolds;
  if (!holds) return { addressable: false, reason: 'nothing owed' };
  // Every read before the first send (many holds taken and read) may outlast the heartbeat timeout: no second
  // attempt may start beside this one, and find the devices unreached as this one did.
  const ready = await keptAlive(() => readyToSend(deps, holds, digest), STORE_WORK_BEATS_FOR_MS);
  if ('unsent' in ready) return ready.unsent;
  const result = await sendDigestPush(deps, digest, ready.told, ready.devices);
  if (result.addressable && result.delivered + result.alreadyDelivered > 0)
    await holds.markDigestSent(digest.digestId, deps.now());
  return result;
}

/**
 * The digest's holds taken and what it tells, its person's devices and those an earlier attempt reached; or why
 * it sends nothing.
 */
async function readyToSend(
  deps: PushActivityDeps,
  holds: PushHoldStore,
  digest: DigestSend,
): Promise<{ unsent: DigestSendResult } | { told: Told; devices: Devices }> {
  const now = deps.now();
  // Before anything takes or settles them again: a stopped digest's rows may have gone out with it.
  await settleStoppedDigests(deps, holds, digest, now);
  const prefs = await deps.notificationPrefs.get(digest.userId, digest.teamId, now);
  await holds.settleOptedOut(digest.teamId, digest.userId, optedOutOf(prefs), now);
  await holds.take(digest.teamId, digest.userId, digest.digestId, now);
  const contents = await holds.contentsOf(digest.digestId, DIGEST_MAX_LISTED);
  if (!contents.total) return { unsent: { addressable: false, reason: 'nothing owed' } };
  // Sent again to a device it missed, even after a newer digest went out: that one tells only what came since
  // (the studio's service worker shows the two together).
  const [told, devices] = await Promise.all([
    toldNow(deps, digest.teamId, contents),
    devicesOf(deps, digest),
  ]);
  if (!devices) return { unsent: { addressable: false, reason: 'no subscription' } };
  return { told, devices };
}

/**
 * The person's rows a digest took and stopped carrying (its chain terminated or lost) went out with it if a device
 * took it, its settle lost before the chain: settled so, never sent again by the digest that finds them next.
 */
async function settleStoppedDigests(
  deps: PushActivityDeps,
  holds: PushHoldStore,
  digest: DigestSend,
  now: Date,
): Promise<void> {
  const stopped = await holds.stoppedDigestsOf(digest.teamId, digest.userId, now);
  for (const digestId of stopped)
    if ((await deps.pushDeliveries.countForEpisode(digestId)) > 0) await holds.markDigestSent(digestId, now);
}

/** The person's devices and those an earlier attempt under the digest's id reached; undefined: no device. */
async function devicesOf(deps: PushActivityDeps, digest: DigestSend): Promise<Devices | undefined> {
  const subs = await deps.pushSubscriptions.listForUsers([digest.userId]);
  if (!subs.length) return undefined;
  const reached = await deps.pushDeliveries.reached(
    digest.digestId,
    subs.map((sub) => sub._id),
  );
  return { subs, reached };
}

/** What the person opted out of since their pushes were held: the kinds turned off, and a teammate's runs. */
const optedOutOf = (prefs: NotificationPrefs): { kinds: string[]; viaTeam: boolean } => ({
  kinds: PREF_KINDS.filter((kind) => !prefs.kinds[kind]),
  viaTeam: prefs.scope === 'own',
});

/**
 * What the digest tells: its rows as held, but a question or a park its run no longer waits on (answered or resumed
 * meanwhile, or the run gone on) is told as no longer waiting, never as still waiting.
 */
async function toldNow(deps: PushActivityDeps, teamId: string, contents: DigestContents): Promise<Told> {
  const newest = contents.newest.map(digestEntryOf);
  if (!contents.waiting.length) return { counts: contents.counts, newest };
  const runs = await deps.runs.waitingOfEach(teamId, [...new Set(contents.waiting.map((w) => w.runId))]);
  const closed = contents.waiting.filter(({ runId, episodeId }) => {
    const run = runs.get(runId);
    return !run || episodeOfStatus(runId, run) !== episodeId;
  });
  if (!closed.length) return { counts: contents.counts, newest };
  const counts = { ...contents.counts };
  for (const { kind } of closed) {
    counts[kind]--;
    counts[DIGEST_CLOSED_KIND[kind]] = (counts[DIGEST_CLOSED_KIND[kind]] ?? 0) + 1;
  }
  const closedEpisodes = new Set(closed.map((w) => w.episodeId));
  return {
    counts,
    newest: newest.map((entry) =>
      closedEpisodes.has(entry.episodeId) ? { ...entry, kind: DIGEST_CLOSED_KIND[entry.kind] } : entry,
    ),
  };
}

/**
 * No device took the digest for a day: its holds give up, counted and logged for the operator. One a device did
 * take (its send recorded, the settle after it lost to a store failure on its last try) went out: its holds say so.
 */
export async function giveUpDigest(deps: PushActivityDeps, digest: DigestRef): Promise<void> {
  const pushHolds = deps.digests?.pushHolds;
  if (!pushHolds) return;
  if ((await deps.pushDeliveries.countForEpisode(digest.digestId)) > 0)
    return pushHolds.markDigestSent(digest.digestId, deps.now());
  const holds = await pushHolds.markDigestGaveUp(digest.digestId, deps.now());
  if (!holds) return;
  deps.metrics?.digestGaveUp(holds);
  deps.log(
    `digest ${digest.digestId}: no device of ${digest.userId} in ${digest.teamId} took it for a day; ` +
      `${holds} held push(es) gave up`,
  );
}

/** A digest started before digests took their holds from the store: it lists them, and marks them sent. */
async function sendListedDigest(
  deps: PushActivityDeps,
  digest: DigestSend,
  episodeIds: string[],
): Promise<DigestSendResult> {
  const devices = await devicesOf(deps, digest);
  const told = { counts: digest.counts ?? {}, newest: digest.listed ?? [] };
  const result: DigestSendResult = devices
    ? await sendDigestPush(deps, digest, told, devices)
    : { addressable: false, reason: 'no subscription' };
  await deps.digests?.pushHolds.markSent(
    episodeIds.map((episodeId) => holdId(episodeId, digest.userId)),
    digest.digestId,
    deps.now(),
  );
  return result;
}

/** What a digest tells: its counts by kind and its newest entries. */
type Told = { counts: Record<string, number>; newest: DigestEntry[] };

/** The person's devices, and those an earlier attempt under the digest's id reached. */
type Devices = { subs: PushSubscriptionRow[]; reached: Reached };

/** The digest to the person's devices, skipping those reached. */
async function sendDigestPush(
  deps: PushActivityDeps,
  digest: DigestSend,
  told: Told,
  { subs, reached }: Devices,
): Promise<DigestSendResult> {
  const payload = renderDigest({
    digestId: digest.digestId,
    tag: digest.tag,
    ...told,
    studioUrl: deps.studioUrl,
  });
  const result = await sendRecorded(deps, digest.digestId, subs, payload, {
    receipts: { teamId: digest.teamId, runId: '', kind: 'digest' },
    onConfigFault: configFaultReporter(deps, {
      runId: '',
      teamId: digest.teamId,
      episodeId: digest.digestId,
    }),
    reached: Promise.resolve(reached),
  });
  return { addressable: true, ...result };
}
