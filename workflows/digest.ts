// One person's digest in one team: the pushes held for them (quiet hours, do-not-disturb, a burst) are signalled
// here by the push activity (signal-with-start), and go out as one push per device once the person can be
// reached: a durable timer to the release time, re-timed when an entry or a prefs change moves it. What a digest
// sends is the person's owed holds in the store, taken at its send: the workflow keeps only when to send, so its
// state stays small however many pushes are held. Each digest is sent under its own claim and recorded per
// device like an episode's push, so a worker lost mid-send repeats nothing. The workflow only decides; activities
// read the prefs, take the holds and send.
import {
  condition,
  continueAsNew,
  ParentClosePolicy,
  patched,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import {
  DIGEST_MAX_LISTED,
  digestEntrySignal,
  digestResendWorkflowId,
  digestSendId,
  prefsChangedSignal,
  type DigestBatch,
  type DigestEntry,
  type DigestInput,
  type DigestResend,
  type DigestResult,
} from '../contract/workflows';
import { callsOutlastingOutages, fanOutCalls, holder, localStoreCalls, unlessChildRunning } from './common';
import { digestResendWorkflow, digestRetryWaits, untilReachableAgain } from './digestResend';

/**
 * Marks executions whose store calls (the prefs read, the digest's claim and its settle, its holds given up) that
 * failed past their quick retries (a store outage of about a quarter of an hour) are made again after a wait, one
 * minute doubling to an hour, for a day. Before, the digest failed there: what it held waited for the sweep's
 * offer an hour past its time, or a day when its holds had been taken. Only a failed call reaches the check.
 */
export const DIGEST_STORE_CALLS_OUTLAST_OUTAGES_PATCH = 'digest-store-calls-outlast-outages';

const store = callsOutlastingOutages(
  localStoreCalls,
  ['digestReleaseAt', 'tryMark', 'markDelivered', 'giveUpDigest'],
  () => patched(DIGEST_STORE_CALLS_OUTLAST_OUTAGES_PATCH),
);

/**
 * Marks executions that continue as new while they wait: a person held for days in a busy team signals one digest
 * thousands of times, and past Temporal's history limit the execution was terminated with everything it held.
 */
export const DIGEST_CONTINUES_WHILE_WAITING_PATCH = 'digest-continues-as-new-while-waiting';

/**
 * Marks executions whose digests send the person's owed holds from the store (taken at the send) instead of the
 * entries the workflow gathered: a batch carried every held episode id through each continue-as-new, and a
 * digest that no device took for a day gave up with nothing to show for it (its holds now say so).
 */
export const DIGEST_TAKES_FROM_STORE_PATCH = 'digest-sends-what-the-store-holds';

/**
 * Marks executions whose digest, having reached some of the person's devices while another's push service failed,
 * hands the device it missed to a resend workflow of its own. Before, the digest settled and that device never got
 * it. Only a send that missed a device reaches the check: other histories replay unchanged.
 */
export const DIGEST_RESENDS_TO_MISSED_DEVICES_PATCH = 'digest-resends-to-missed-devices';

const emptyBatch = (): DigestBatch => ({
  episodeIds: [],
  listed: [],
  counts: {},
  burstUntil: 0,
  quietUntil: 0,
});

/** When the batch may go out (epoch ms): every reason it was held has passed. */
const releaseOf = (batch: DigestBatch): number => Math.max(batch.burstUntil, batch.quietUntil);

const hasEntries = (batch: DigestBatch): boolean => batch.episodeIds.length > 0 || (batch.pending ?? 0) > 0;

/** Moves the batch's release to cover the entry. */
function timeFor(batch: DigestBatch, entry: DigestEntry): void {
  const releaseAt = Date.parse(entry.releaseAt);
  if (entry.reason === 'burst') batch.burstUntil = Math.max(batch.burstUntil, releaseAt);
  else batch.quietUntil = Math.max(batch.quietUntil, releaseAt);
}

/**
 * An entry of a digest that takes its holds from the store: only when, and that something waits. Answers whether
 * it held the batch later for quiet hours or do-not-disturb: its push read the prefs before it was signalled, and
 * a change since (do-not-disturb cleared) may have made that time stale.
 */
function note(batch: DigestBatch, entry: DigestEntry): boolean {
  const quietBefore = batch.quietUntil;
  timeFor(batch, entry);
  batch.pending = (batch.pending ?? 0) + 1;
  return batch.quietUntil > quietBefore;
}

/**
 * Marks executions that read the prefs again when an entry holds the batch later for quiet hours or do-not-disturb:
 * an entry held under prefs read before a change (do-not-disturb cleared early) kept the digest until the old end,
 * up to 7 days late. Only such an entry reaches the check: other histories replay unchanged.
 */
export const DIGEST_REREADS_AFTER_QUIET_ENTRY_PATCH = 'digest-rereads-prefs-after-a-quiet-entry';

/**
 * Marks executions that, continuing as new after a send, hand on that an entry arrived during the send holding
 * the batch later for quiet hours: the next execution reads the prefs again (as a prefs change). Before, it waited
 * for that entry's release time, stale when the quiet hours had ended since (up to 7 days late). Only such an
 * entry at such a continue-as-new reaches the check.
 */
export const DIGEST_CARRIES_QUIET_REREAD_PATCH = 'digest-carries-quiet-entry-reread';

/**
 * Marks executions that read the prefs again at every release a read at a release moved later (a burst ending inside
 * quiet hours waits for their end, and reads again then). Before, only the first release was read: a do-not-disturb
 * set meanwhile whose signal was lost (the prefs route tells the digest at most once) was sent into. Only a release
 * moved later after a read at a release (by that read, or an entry meanwhile) reaches the check.
 */
export const DIGEST_READS_AT_EVERY_RELEASE_PATCH = 'digest-reads-prefs-at-every-release';

/**
 * Marks executions that read the person's prefs again when the sweep offers their holds (an entry with
 * `rereadPrefs`): a prefs change the route could not tell (no digest running, Temporal away) left the holds until
 * the old release, up to 7 days late. Only such an entry reaches the check (a worker from before the change ignores
 * the field; its histories replay as it ran).
 */
export const DIGEST_OFFER_REREADS_PREFS_PATCH = 'digest-offer-rereads-prefs';

/**
 * Marks executions whose digests are named by the whole first run id (digestSendId). Before, by its first 8
 * characters: Temporal's time-ordered run ids share them within about a minute, so a digest chain started within a
 * minute of the person's last found that one's settled claim under the same id, and sent nothing (its holds waited
 * an hour for the sweep). Every send reaches the check.
 */
export const DIGEST_ID_WHOLE_RUN_ID_PATCH = 'digest-id-carries-whole-run-id';

/** Adds an entry once per episode (a retried fan-out signals again); the newest DIGEST_MAX_LISTED are listed. */
function add(batch: DigestBatch, seen: Set<string>, entry: DigestEntry): void {
  if (seen.has(entry.episodeId)) return;
  seen.add(entry.episodeId);
  batch.episodeIds.push(entry.episodeId);
  batch.counts[entry.kind] = (batch.counts[entry.kind] ?? 0) + 1;
  timeFor(batch, entry);
  batch.listed.push(entry);
  batch.listed.sort((a, b) => Date.parse(b.at) - Date.parse(a.at));
  if (batch.listed.length > DIGEST_MAX_LISTED) batch.listed.length = DIGEST_MAX_LISTED;
}

export async function digestWorkflow(input: DigestInput): Promise<DigestResult> {
  const { teamId, userId } = input;
  const { workflowId, firstExecutionRunId } = workflowInfo();
  // Decided once, first: each held push's signal wakes the wait to ask whether to continue as new.
  const continuesWhileWaiting = patched(DIGEST_CONTINUES_WHILE_WAITING_PATCH);
  const takesFromStore = patched(DIGEST_TAKES_FROM_STORE_PATCH);
  let batch = input.batch ?? emptyBatch();
  const seen = new Set(batch.episodeIds);
  let sent = input.sent ?? 0;
  // A prefs change not read yet when the last execution continued as new is read here.
  let prefsChanged = input.prefsChanged ?? false;
  let heldLaterForQuiet = false;
  setHandler(digestEntrySignal, (entry) => {
    // Offered again by the sweep: a prefs change whose signal was lost is read.
    if (entry.rereadPrefs && patched(DIGEST_OFFER_REREADS_PREFS_PATCH)) prefsChanged = true;
    if (!takesFromStore) return add(batch, seen, entry);
    if (note(batch, entry)) heldLaterForQuiet = true;
  });
  setHandler(prefsChangedSignal, () => {
    prefsChanged = true;
  });

  for (;;) {
    // Started by signal-with-start, so its first entry is here; only a start without one waits (a while).
    if (!hasEntries(batch) && !(await condition(() => hasEntries(batch), '1 hour'))) return { sent };
    await untilReachable();
    const out = batch;
    batch = emptyBatch();
    // `seen` stays: an episode signalled again (a retried fan-out) after its digest went out is not sent twice.
    sent++;
    // Unique across the person's executions: a later chain starts with another first run id.
    await sendOnce(
      patched(DIGEST_ID_WHOLE_RUN_ID_PATCH)
        ? digestSendId(workflowId, firstExecutionRunId, sent)
        : `digest|${workflowId}|${firstExecutionRunId.slice(0, 8)}.${sent}`,
      out,
    );
    // What arrived during the send is the next batch; nothing: done (the next hold starts a new execution).
    if (!hasEntries(batch)) return { sent };
    if (workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof digestWorkflow>({
        teamId,
        userId,
        batch,
        sent,
        prefsChanged: prefsChanged || (heldLaterForQuiet && patched(DIGEST_CARRIES_QUIET_REREAD_PATCH)),
      });
  }

  /**
   * Waits for the release time on a durable timer, re-timed when an entry moves it or the prefs change (re-read
   * through an activity), and asks the prefs once more when it comes: a burst may end inside quiet hours.
   */
  async function untilReachable(): Promise<void> {
    let askedAtRelease = false;
    for (;;) {
      if (prefsChanged || (heldLaterForQuiet && patched(DIGEST_REREADS_AFTER_QUIET_ENTRY_PATCH))) {
        prefsChanged = false;
        heldLaterForQuiet = false;
        batch.quietUntil = (await store.digestReleaseAt(teamId, userId)) ?? 0;
      }
      const releaseAt = releaseOf(batch);
      if (releaseAt > Date.now()) {
        // Read at a release and moved later: that release is read again when it comes.
        if (askedAtRelease && patched(DIGEST_READS_AT_EVERY_RELEASE_PATCH)) askedAtRelease = false;
        // The batch goes on in a fresh history; a prefs change not yet read is read again at the release.
        if (continuesWhileWaiting && workflowInfo().continueAsNewSuggested)
          await continueAsNew<typeof digestWorkflow>({ teamId, userId, batch, sent, prefsChanged });
        await condition(
          () =>
            prefsChanged ||
            releaseOf(batch) !== releaseAt ||
            (continuesWhileWaiting && workflowInfo().continueAsNewSuggested),
          releaseAt - Date.now(),
        );
        continue;
      }
      if (askedAtRelease) return;
      askedAtRelease = true;
      prefsChanged = true;
    }
  }

  async function sendOnce(digestId: string, out: DigestBatch): Promise<void> {
    const me = holder();
    if (!(await store.tryMark(digestId, me))) return; // another execution holds it: sent or sending there
    const waits = digestRetryWaits();
    const listed = takesFromStore
      ? {}
      : { listed: out.listed, counts: out.counts, episodeIds: out.episodeIds };
    const digest = { digestId, teamId, userId, tag: workflowId };
    for (;;) {
      let result: string;
      let missedSome = false;
      try {
        const answer = await fanOutCalls.sendDigest({ ...digest, ...listed });
        if (!answer.addressable) result = `not_addressable: ${answer.reason}`;
        else {
          result = answer.delivered + answer.alreadyDelivered > 0 ? 'delivered' : 'failed';
          missedSome = answer.retryable > 0;
        }
      } catch {
        result = 'failed'; // every attempt of the fan-out failed
      }
      // A device took it while another's push service failed: that one is tried again apart, and the person's
      // next digest goes on meanwhile.
      if (result === 'delivered' && missedSome && takesFromStore)
        if (patched(DIGEST_RESENDS_TO_MISSED_DEVICES_PATCH))
          await resendToMissedDevices(digestResendWorkflowId(firstExecutionRunId, sent), digest);
      const wait = result === 'failed' ? waits.next() : undefined;
      if (!wait || wait.done) {
        // Its holds say they gave up: no device took it for a day, or the person has no device left.
        const noDevice = result === 'failed' || result === 'not_addressable: no subscription';
        if (noDevice && takesFromStore) await store.giveUpDigest({ digestId, teamId, userId });
        await store.markDelivered(digestId, me, result);
        return;
      }
      // No device took it: try again once the push service may be back, and the person reachable.
      await sleep(wait.value * 1000);
      await untilReachableAgain(teamId, userId);
    }
  }
}

/** The digest's resend workflow, started once (a retried start finds it running); it outlives the digest. */
async function resendToMissedDevices(workflowId: string, digest: DigestResend): Promise<void> {
  await unlessChildRunning(
    () =>
      startChild(digestResendWorkflow, {
        workflowId,
        args: [digest],
        parentClosePolicy: ParentClosePolicy.ABANDON,
      }),
    undefined,
  );
}
