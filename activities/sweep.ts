// The reconciliation sweep: replays the episodes whose start never happened (emitter crashed, Temporal was
// unreachable) or whose family released its claim. Starts are idempotent by workflow id, and the claim stays the
// authority: an episode replayed needlessly loses its claim and delivers nothing, so the sweep is safe to run twice.
//
// One pass costs, in database round trips (the bench:sweep target is "pages + 1"):
//   1       one claims pre-check for the whole window, before any run is listed (a range read, see markedSince);
//   pages   the window's runs, listed with what buildRunOutcome reads but final answers (up to 1 MB each), one
//           cursor batch per page; the owed episodes of a page start from the listed run right away, so an outcome
//           is at most a page old when its episode starts.
//   0–pages the final answers of a page's owed finished runs, by id: none when no finished run is owed.
//   0–pages a page's episodes that began before the pre-check's range (runs touched back into the window long after
//           they settled), their keys asked by key: none in the usual pass.
//   0–pages a page's pauses under the standby veto that a team endpoint is owed: their team events asked by id
//           (and each such team's endpoints, once a pass): none without watched pauses and endpoints.
//   0–k     the runs of episodes released since the pre-check's range began, outside the window (asked by id,
//           1,000 at a time until a pass's worth still owed is found), and their older claims by key: none without
//           releases.
//   0–k     the team events whose delivery was released since the range began (their headers asked by id, 1,000
//           at a time until a pass's worth recorded before the window is found): none without such releases.
//   1       where digests are on: the held pushes still owed past their time (an indexed range read, at most
//           1,000), each person's offered to their digest.
//   1       the transitions left open past a live writer's time (an indexed read, at most 1,000), each finished.
// Expired claims are reaped by a separate activity (sweepReapExpired): housekeeping, not reconciliation.
import { isGrpcServiceError, ServiceError, type Client } from '@temporalio/client';
import { startEpisode } from '../client/emitter';
import { createInteractionSignaler, interactionOf, startInteraction } from '../client/interaction';
import type { CallbackExhaustedRaiser, EndpointDisabledRaiser } from '../client/operator';
import { interactionClaimKeys, runWaitsOn } from '../domain/interaction';
import { IllegalTransitionError } from '../domain/runStatus';
import type { AnsweredInteraction, InteractionStore } from '../store/interactions';
import { mapBounded } from '../platform/concurrency';
import { activityContext } from './activityContext';
import {
  outcomeOfRef,
  owedEpisode,
  vetoedPauseEvent,
  type OwedEpisode,
  type SweepFamilies,
} from '../domain/sweep';
import type { ActionTokenStore } from '../store/actionTokens';
import type { PushReceiptStore } from '../store/push/receipts';
import type { ClaimStore, ReleasedEpisode, ReleasedTeamDelivery, Releases } from '../store/claims';
import type { PushDeliveryStore } from '../store/push/deliveries';
import type { CallbackAttemptStore } from '../store/callback/attempts';
import { raiseTeamEvent } from '../client/teamEvents';
import { claimKeys, RAISED_AGAIN_WITHIN_SECONDS, type RunOutcome } from '../domain/outcome';
import { endpointDeliveryKey, type TeamEvent } from '../domain/teamEvents';
import {
  owedTeamEvent,
  subscribedWhen,
  type EndpointRow,
  type EndpointStore,
} from '../store/endpoint/endpoints';
import { teamEventOf, type TeamEventHeader, type TeamEventStore } from '../store/endpoint/teamEvents';
import type { RateLimitStore } from '../store/rateLimits';
import {
  digestEntryOf,
  HOLD_REOFFER_AFTER_SECONDS,
  type PushHoldRow,
  type PushHoldStore,
} from '../store/push/holds';
import type { RunStore } from '../store/runs';
import type { RunTransitionStore } from '../store/runTransitions';
import type { DigestEntry, EpisodeOptions, InteractionRef, SweepPass } from '../contract/workflows';
import type { Metrics } from '../platform/metrics';

/**
 * How far before the lookback window the claims pre-check reads. A claim is written after its episode began (the
 * run's updatedAt), but by another process's clock: this absorbs clock skew between API, runner and worker hosts.
 */
export const SWEEP_CLAIM_SLACK_SECONDS = 3600;

/** Episode starts in flight at once. */
const START_LANES = 8;

/** Released episodes outside the window one pass looks at, the longest released first; the next takes the rest. */
const RELEASED_PER_PASS = 1000;

/**
 * How long after its last release an episode past the sweep's reach is given up: a live episode's push, released
 * between its tries while a sibling runs, is released again at least hourly (RELEASED_PUSH_BACKOFF_PATCH's waits).
 */
const RELEASED_QUIET_SECONDS = 2 * 3600;

/**
 * The longest an episode (or an answered close) released again and again rests between the sweep's replays. It
 * rests as long as it has been released (its last release less its first), so replays that keep failing (a device
 * whose host never resolves) come less and less often, at most this far apart, instead of every pass for the
 * sweep's whole reach.
 */
const RELEASED_REST_MAX_SECONDS = 3600;

/** Released again lately, after releases spanning longer: not replayed yet. */
function rests(release: Releases | undefined, now: number): boolean {
  if (!release) return false;
  const rest = Math.min(RELEASED_REST_MAX_SECONDS * 1000, +release.lastReleasedAt - +release.firstReleasedAt);
  return now - +release.lastReleasedAt < rest;
}

/** Whether the episode's released claims all rest now (see rests). */
function resting(
  episode: OwedEpisode,
  releases: Map<string, ReleasedEpisode>,
  marked: Set<string>,
  now: number,
) {
  return episode.keys.every((key) => marked.has(key) || rests(releases.get(key), now));
}

/** The sweep as the holder of what it writes in the claims (a note, a claim it gives up). */
const SWEEP_HOLDER = 'sweep';

/** How the sweep settles a family released past its reach: given up, visibly. */
const RELEASED_PAST_REACH = "gave_up: released past the sweep's reach";

/** How it settles a team event's delivery released for an endpoint no longer owed it (its recover's, if enabled). */
const RELEASED_NOT_OWED = 'gave_up: no longer owed to the endpoint (changed since)';

/** Lost closes one pass replays (it reads every answer of the window to find them); the next pass takes the rest. */
const ANSWERS_PER_PASS = 1000;

/** Owed team events one pass raises again (it reads every event of the window to find them). */
const TEAM_EVENTS_PER_PASS = 1000;

/** Owed holds one pass looks at: the longest waiting first; the next pass takes the rest. */
const HOLDS_PER_PASS = 1000;

/** While a pass waits on one long query, the activity still tells Temporal it is alive this often. */
const KEEPALIVE_MS = 5000;

/**
 * How long after its decision a transition still unfinished is taken for one whose writer died: a request's own
 * win, status write and events take well under this, and finishing one beside its live writer is harmless
 * (the status write is filtered on the revision, events have ids), only wasted.
 */
const STUCK_TRANSITION_GRACE_SECONDS = 300;

/** Open transitions one pass finishes at most, the oldest first. */
const TRANSITIONS_PER_PASS = 1000;

export interface SweepDeps {
  runs: RunStore;
  claims: ClaimStore;
  pushDeliveries: PushDeliveryStore;
  callbackAttempts: CallbackAttemptStore;
  rateLimits: RateLimitStore;
  /** Absent: no digests here (the sweep's own tests and bench). */
  pushHolds?: PushHoldStore;
  actionTokens?: ActionTokenStore;
  pushReceipts?: PushReceiptStore;
  /** Absent: no interaction workflows here (the sweep's own tests and bench). */
  interactions?: InteractionStore;
  /**
   * Resumes a run still paused on a question whose answer is stored (its request died between the two writes),
   * through the runs service's transition, which then closes the question. Absent: only the close is replayed.
   */
  finishStoredAnswer?: (ref: InteractionRef) => Promise<void>;
  /**
   * Finishes the run's revision that a transition won and whose writer died before the status write, or whose
   * events or health signal were left undone, through the runs service (its outcome then goes out); false when
   * there was none. Absent: such revisions are not looked for.
   */
  finishStuckTransition?: (runId: string, revision: number) => Promise<boolean>;
  runTransitions?: RunTransitionStore;
  /** The team endpoints' attempt log (the callbacks' rows, in endpoint_attempts). */
  endpointAttempts?: CallbackAttemptStore;
  teamEvents?: TeamEventStore;
  /** The teams' endpoints: who is owed a team event (absent: no team events looked at). */
  endpoints?: EndpointStore;
  /** Starts an endpoint_disabled alert its disabler did not (absent: no operator alerts, none owed). */
  endpointDisabled?: EndpointDisabledRaiser;
  /** Starts the callback_exhausted alert of a callback the sweep gives up (absent: no operator alerts). */
  callbackExhausted?: CallbackExhaustedRaiser;
  /** Signal-with-start of a person's digest, for the held pushes still owed past their time. */
  offerToDigest?: (teamId: string, userId: string, entry: DigestEntry) => Promise<void>;
  client: Client;
  taskQueue: string;
  episodeOptions: EpisodeOptions;
  families: SweepFamilies;
  lookbackSeconds: number;
  pageSize: number;
  /** Owed team events one pass raises again (TEAM_EVENTS_PER_PASS unless given: a test's small window). */
  teamEventsPerPass?: number;
  now: () => Date;
  /** Each pass (its time and counts) and each episode it started; absent: nothing is recorded. */
  metrics?: Pick<Metrics, 'sweepPass' | 'episodeStarted'>;
}

/** What a pass reports in its heartbeats: where it is, for the Temporal UI and a post-mortem. */
interface SweepProgress extends SweepPass {
  phase:
    | 'listing'
    | 'claims'
    | 'starting'
    | 'released'
    | 'interactions'
    | 'team events'
    | 'holds'
    | 'transitions'
    | 'endpoint alerts';
}

export function createSweepActivities(deps: SweepDeps) {
  return {
    async sweepOnce(): Promise<SweepPass> {
      const startedAt = performance.now();
      const pass: SweepPass = { scanned: 0, unsettled: 0, started: 0 };
      const since = new Date(deps.now().getTime() - deps.lookbackSeconds * 1000);
      const progress = heartbeats();
      const endpointsOf = deps.endpoints && teamEndpoints(deps.endpoints);
      try {
        // 1. One claims pre-check for the whole window, before any run is listed. A claim written after it reads
        //    as missing: that episode's start is refused (already running) or its replay loses the claim.
        progress.beat({ phase: 'claims', ...pass });
        const claimsFrom = new Date(since.getTime() - SWEEP_CLAIM_SLACK_SECONDS * 1000);
        const claims = await deps.claims.markedSince(claimsFrom);
        const { marked, releasedTeamDeliveries } = claims;
        // A release settled since (replayed and delivered, given up) or in hand again is nobody's to replay.
        const released = claims.released.filter(({ key }) => !marked.has(key));
        const releaseByKey = new Map(released.map((release) => [release.key, release]));
        const startedAtMs = deps.now().getTime();
        // A start or signal Temporal answers and refuses (its limits) is counted and holds back nothing else: it
        // stays owed, asked again next pass. Temporal away fails the pass, retried.
        const refused: Refused = unlessRefused(() => {
          pass.startsRefused = (pass.startsRefused ?? 0) + 1;
          return undefined;
        });
        const startOwed = (episodes: OwedEpisode[]) =>
          startEpisodes(
            deps,
            episodes.filter((episode) => !resting(episode, releaseByKey, marked, startedAtMs)),
            { pass, refused, progress },
          );

        // 2. The window, a page at a time: each owed episode with a claim missing starts from the listed run.
        const releasedOutside = new Set(released.map(({ runId }) => runId));
        for await (const page of deps.runs.listNotifiableRefs(since, deps.pageSize)) {
          pass.scanned += page.length;
          if (releasedOutside.size) for (const ref of page) releasedOutside.delete(ref._id);
          // Each run's outcome built once, for what it owes and for its question.
          const outcomes = page.map((ref) => ({ ref, outcome: outcomeOfRef(ref) }));
          const owed = outcomes.flatMap(({ ref, outcome }) => owedEpisode(ref, deps.families, outcome) ?? []);
          const questions = deps.interactions ? questionsOf(outcomes.map(({ outcome }) => outcome)) : [];
          await markOlderClaims(deps, owed, questions, marked, claimsFrom);
          const unsettled = owed.filter((episode) => episode.keys.some((key) => !marked.has(key)));
          pass.unsettled += unsettled.length;
          progress.beat({ phase: 'starting', ...pass });
          if (deps.interactions)
            pass.interactionsStarted =
              (pass.interactionsStarted ?? 0) + (await startUnopened(deps, questions, marked, refused));
          const vetoed = outcomes.flatMap(({ ref, outcome }) => vetoedPauseEvent(ref, outcome) ?? []);
          if (vetoed.length && deps.teamEvents && endpointsOf)
            pass.teamEventsRaised =
              (pass.teamEventsRaised ?? 0) +
              (await announceVetoedPauses(deps, deps.teamEvents, endpointsOf, vetoed, refused));
          await startOwed(unsettled);
          progress.beat({ phase: 'listing', ...pass });
        }

        // 3. Episodes released since the range began whose run has left the window (a replay started late in it
        //    that failed again): replayed within a window of their first release, given up visibly past it.
        if (releasedOutside.size) {
          progress.beat({ phase: 'released', ...pass });
          const notes = released.filter(({ runId }) => releasedOutside.has(runId));
          const outside = await releasedOutsideWindow(deps, notes, since, marked, claimsFrom);
          pass.scanned += outside.scanned;
          pass.unsettled += outside.unsettled;
          await startOwed(outside.replay);
          const gaveUp = await giveUpReleased(deps, outside.giveUp, marked, refused);
          if (gaveUp) pass.gaveUpReleased = gaveUp;
        }

        // 4. Answers whose close never ran (the answer's signal was lost): signalled again.
        if (deps.interactions) {
          progress.beat({ phase: 'interactions', ...pass });
          const answers = {
            since,
            resting: (id: string) => rests(claims.releasedCloses.get(id), startedAtMs),
          };
          pass.closesReplayed = await replayCloses(deps, deps.interactions, answers, marked, refused);
        }

        // 5. Team events an endpoint is still owed (their delivery released, nothing sent): raised again. Then
        //    those released since the range began that were recorded before the window, as the episodes of 3.
        if (deps.teamEvents && endpointsOf) {
          progress.beat({ phase: 'team events', ...pass });
          pass.teamEventsRaised =
            (pass.teamEventsRaised ?? 0) +
            (await raiseOwedTeamEvents(deps, deps.teamEvents, endpointsOf, since, marked, refused));
          const outside = await releasedTeamEventsOutsideWindow(
            deps,
            deps.teamEvents,
            endpointsOf,
            releasedTeamDeliveries,
            since,
            marked,
            refused,
          );
          pass.teamEventsRaised += outside.raised;
          if (outside.gaveUp) pass.gaveUpReleased = (pass.gaveUpReleased ?? 0) + outside.gaveUp;
        }

        // 6.–8. What the store itself marks owed, outside the window's claims.
        await replayStoreMarked(deps, pass, progress, refused);
        deps.metrics?.sweepPass((performance.now() - startedAt) / 1000, pass);
        return pass;
      } finally {
        progress.stop();
      }
    },

    /**
     * TTL indexes do this where the server has them (not FerretDB v1); harmless where they do. Each collection's
     * reaper runs whatever another's did: one that fails fails the pass after the rest ran (its retry reaps it).
     */
    async sweepReapExpired(): Promise<number> {
      const progress = heartbeats();
      const reapers = [
        () => deps.claims.reapExpired(),
        () => deps.pushDeliveries.reapExpired(deps.now()),
        () => deps.callbackAttempts.reapExpired(deps.now()),
        () => deps.rateLimits.reapExpired(deps.now()),
        () => deps.pushHolds?.reapExpired(deps.now()),
        () => deps.actionTokens?.reapExpired(deps.now()),
        () => deps.pushReceipts?.reapExpired(deps.now()),
        () => deps.endpointAttempts?.reapExpired(deps.now()),
        () => deps.teamEvents?.reapExpired(deps.now()),
      ];
      let reaped = 0;
      const failed: unknown[] = [];
      try {
        for (const reap of reapers) {
          try {
            reaped += (await reap()) ?? 0;
          } catch (err) {
            failed.push(err);
          }
        }
      } finally {
        progress.stop();
      }
      if (failed.length > 1) throw new AggregateError(failed, `${failed.length} reapers failed`);
      if (failed.length) throw failed[0];
      return reaped;
    },
  };
}

/** A pass's handler of a start or signal Temporal refused: counted, answering undefined; an outage is thrown. */
type Refused = (err: unknown) => undefined;

/** A question a page's run is paused on, and when it was asked. */
interface PageQuestion {
  interaction: InteractionRef;
  askedAt: string;
}

/** The questions of a page's outcomes. */
const questionsOf = (outcomes: (RunOutcome | undefined)[]): PageQuestion[] =>
  outcomes.flatMap((outcome) => {
    const interaction = outcome && interactionOf(outcome);
    return interaction ? [{ interaction, askedAt: outcome.occurredAt }] : [];
  });

/**
 * Starts the owed episodes, with their runs' final answers, a few at a time: each is one Temporal round trip,
 * idempotent by workflow id; one Temporal refuses is counted and holds back no other.
 */
async function startEpisodes(
  deps: SweepDeps,
  episodes: OwedEpisode[],
  { pass, refused, progress }: { pass: SweepPass; refused: Refused; progress: ReturnType<typeof heartbeats> },
): Promise<void> {
  await mapBounded(await withFinalAnswers(deps, episodes), START_LANES, async ({ outcome }) => {
    const started = await startEpisode(
      deps.client,
      deps.taskQueue,
      outcome,
      deps.episodeOptions,
      'ALLOW_DUPLICATE',
    ).catch(refused);
    if (started) {
      pass.started++;
      deps.metrics?.episodeStarted('sweep', outcome.kind);
    }
    progress.beat({ phase: 'starting', ...pass });
  });
}

/**
 * The owed episodes with their runs' final answers, which the listing leaves out (up to 1 MB each): read here, for
 * the few that owe an episode, in one round trip.
 */
async function withFinalAnswers(deps: SweepDeps, episodes: OwedEpisode[]): Promise<OwedEpisode[]> {
  const finished = episodes.filter(({ outcome }) => outcome.status === 'finished');
  if (!finished.length) return episodes;
  const answers = await deps.runs.finalAnswersOf(finished.map(({ runId }) => runId));
  return episodes.map((episode) => {
    const finalAnswer = answers.get(episode.runId);
    return finalAnswer === undefined ? episode : { ...episode, outcome: { ...episode.outcome, finalAnswer } };
  });
}

/**
 * The questions of this page whose workflow never opened (the emitter died between the episode and it): started,
 * so their ladder runs (rungs already due go out at once). One found running (its emitter started it and failed to
 * note it) is noted here, so later passes leave it. Answers how many were started.
 */
async function startUnopened(
  deps: SweepDeps,
  questions: PageQuestion[],
  marked: Set<string>,
  refused: Refused,
): Promise<number> {
  const unopened = questions.flatMap(({ interaction }) =>
    marked.has(interactionClaimKeys.opened(interaction.interactionId)) ? [] : [interaction],
  );
  let started = 0;
  await mapBounded(unopened, START_LANES, async (ref) => {
    const opened = await startInteraction(deps.client, deps.taskQueue, ref).catch(refused);
    if (opened) started++;
    else if (opened === false)
      await deps.claims.noteOnce(interactionClaimKeys.opened(ref.interactionId), SWEEP_HOLDER, 'opened');
  });
  return started;
}

/**
 * The released episodes whose run is outside the window (not changed since it began), as owed now: those still
 * unsettled are replayed while their first release is inside the window (a release moves the sweep's reach on),
 * and past it given up once nothing released them for RELEASED_QUIET_SECONDS (replayed for ever, a device whose
 * push service always fails would start an episode every pass). An episode its run no longer owes is left.
 */
async function releasedOutsideWindow(
  deps: SweepDeps,
  released: ReleasedEpisode[],
  since: Date,
  marked: Set<string>,
  claimsFrom: Date,
): Promise<{ scanned: number; unsettled: number; replay: OwedEpisode[]; giveUp: OwedEpisode[] }> {
  // Per episode: its first release (the reach counts from it) and its last (a live holder releases again).
  const releases = new Map<string, { first: number; last: number }>();
  for (const { episodeId, firstReleasedAt, lastReleasedAt } of released) {
    const seen = releases.get(episodeId);
    releases.set(episodeId, {
      first: Math.min(firstReleasedAt.getTime(), seen?.first ?? Infinity),
      last: Math.max(lastReleasedAt.getTime(), seen?.last ?? 0),
    });
  }
  const longestReleased = [...released].sort((a, b) => +a.firstReleasedAt - +b.firstReleasedAt);
  const runIds = [...new Set(longestReleased.map(({ runId }) => runId))];
  // A pass's worth of owed episodes, read a pass's worth of runs at a time: notes their runs no longer owe (a
  // question answered since, its run running again) are left, and must not take the places of those still owed.
  const owed: OwedEpisode[] = [];
  let scanned = 0;
  for (let from = 0; from < runIds.length && owed.length < RELEASED_PER_PASS; from += RELEASED_PER_PASS) {
    const refs = await deps.runs.notifiableRefsBefore(runIds.slice(from, from + RELEASED_PER_PASS), since);
    scanned += refs.length;
    for (const ref of refs) {
      const episode = owedEpisode(ref, deps.families);
      if (episode && releases.has(episode.episodeId)) owed.push(episode);
    }
  }
  owed.splice(RELEASED_PER_PASS);
  await markOlderClaims(deps, owed, [], marked, claimsFrom);
  const unsettled = owed.filter((episode) => episode.keys.some((key) => !marked.has(key)));
  const releasesOf = (episode: OwedEpisode) => releases.get(episode.episodeId)!;
  const quietSince = deps.now().getTime() - RELEASED_QUIET_SECONDS * 1000;
  return {
    scanned,
    unsettled: unsettled.length,
    replay: unsettled.filter((episode) => releasesOf(episode).first >= since.getTime()),
    // Past the reach: given up once nothing released it for a while (a live holder between tries would have).
    giveUp: unsettled.filter(
      (episode) => releasesOf(episode).first < since.getTime() && releasesOf(episode).last < quietSince,
    ),
  };
}

/**
 * Settles the families of these episodes still unsettled as given up (RELEASED_PAST_REACH); a callback's newest
 * attempt is marked given up too, so a callback recover finds it, and the operator is told (callback_exhausted).
 * Answers how many episodes were.
 */
async function giveUpReleased(
  deps: Pick<SweepDeps, 'claims' | 'callbackAttempts' | 'callbackExhausted'>,
  episodes: OwedEpisode[],
  marked: Set<string>,
  refused: Refused,
): Promise<number> {
  let gaveUp = 0;
  await mapBounded(episodes, START_LANES, async (episode) => {
    const keys = episode.keys.filter((key) => !marked.has(key));
    const callbackKey = claimKeys.callback(episode.episodeId);
    // Marked before the settle: a mark lost after it would never be made (the next pass finds the claim settled).
    // A recover passes over a mark whose settle lost to a holder come back (the claim is not given up).
    const newest = keys.includes(callbackKey)
      ? await deps.callbackAttempts.markNewestGaveUp(episode.episodeId)
      : undefined;
    // Raised in hand, before the settle: Temporal away fails the pass with the claim still the sweep's, and a
    // later pass (once it is stale) raises it again; settled first, the alert would be lost with that pass.
    // Throttled (RESOURCE_EXHAUSTED), the callback is released, not settled: given up, and raised, once quiet
    // again. Refused for good (its id, its input), it is settled without its alert, counted refused.
    const raise = deps.callbackExhausted;
    let raiseThrottled = false;
    const beforeSettle = async (key: string): Promise<void> => {
      if (key !== callbackKey || !raise) return;
      await raise(episode.outcome, newest?.attempt ?? 0, RELEASED_PAST_REACH).catch((err: unknown) => {
        refused(err);
        if (!isThrottled(err)) return;
        raiseThrottled = true;
        throw err;
      });
    };
    try {
      if (await giveUpKeys(deps.claims, keys, RELEASED_PAST_REACH, beforeSettle)) gaveUp++;
    } catch (err) {
      if (!raiseThrottled) throw err;
      await deps.claims.unmark(callbackKey, SWEEP_HOLDER);
    }
  });
  return gaveUp;
}

/** Settles these claims given up, as `result` says; true when one of them was. */
async function giveUpKeys(
  claims: ClaimStore,
  keys: string[],
  result: string,
  beforeSettle?: (key: string) => Promise<void>,
): Promise<boolean> {
  const settled = await Promise.all(
    keys.map((key) => claims.giveUp(key, SWEEP_HOLDER, result, beforeSettle)),
  );
  return settled.some(Boolean);
}

/**
 * The keys of the page's episodes that began before the pre-check's range (a run touched back into the window long
 * after its episode settled: a watch ended on a paused run), asked by key: their claims, written as the episode
 * began, are older than the range and read as missing there, so the episode would be replayed, and lose its claim,
 * on every pass for the window. One read, only for a page that has such an episode.
 */
async function markOlderClaims(
  deps: SweepDeps,
  owed: OwedEpisode[],
  questions: PageQuestion[],
  marked: Set<string>,
  claimsFrom: Date,
): Promise<void> {
  const isOlder = (at: string) => Date.parse(at) < claimsFrom.getTime();
  const keys = [
    ...owed.flatMap((episode) => (isOlder(episode.outcome.occurredAt) ? episode.keys : [])),
    // Every question of the page, owed or not: one under the standby veto owes no push, yet its workflow is
    // started by startUnopened unless its note is known.
    ...questions.flatMap(({ interaction, askedAt }) =>
      isOlder(askedAt) ? [interactionClaimKeys.opened(interaction.interactionId)] : [],
    ),
  ];
  const older = keys.filter((key) => !marked.has(key));
  if (older.length) for (const key of await deps.claims.markedAmong(older)) marked.add(key);
}

/**
 * Interactions answered in the window whose close has no claim, unless it rests (released again and again): their
 * workflow is told again, and a run still paused on its answered question is resumed first.
 */
async function replayCloses(
  deps: SweepDeps,
  interactions: InteractionStore,
  answers: { since: Date; resting: (interactionId: string) => boolean },
  marked: Set<string>,
  refused: Refused,
): Promise<number> {
  // Every answer of the window is looked at (closed ones are most of them), up to a pass's worth of replays.
  const missed: AnsweredInteraction[] = [];
  for await (const page of interactions.answeredSince(answers.since, deps.pageSize)) {
    for (const row of page)
      if (!marked.has(interactionClaimKeys.answered(row._id)) && !answers.resting(row._id)) missed.push(row);
    if (missed.length >= ANSWERS_PER_PASS) break;
  }
  missed.splice(ANSWERS_PER_PASS);
  const signals = createInteractionSignaler(deps.client, deps.taskQueue);
  let replayed = 0;
  await mapBounded(missed, START_LANES, async (row) => {
    const ref = { runId: row.runId, teamId: row.teamId, interactionId: row._id };
    if (deps.finishStoredAnswer && runWaitsOn(await deps.runs.waitingOf(row.teamId, row.runId), row._id)) {
      try {
        await deps.finishStoredAnswer(ref);
        replayed++;
        return;
      } catch (err) {
        // The run moved on meanwhile (cancelled, or resumed by the answer's own retry): the close is still owed.
        if (!(err instanceof IllegalTransitionError)) throw err;
      }
    }
    const at = (row.answeredAt ?? deps.now()).toISOString();
    if (await signals.answered(ref, { answeredBy: row.answeredBy ?? '', at }).then(() => true, refused))
      replayed++;
  });
  return replayed;
}

/**
 * What the store itself marks owed, whatever the window's claims say: held pushes past their time, transitions
 * left unfinished, endpoint alerts not started. Each counted in the pass.
 */
async function replayStoreMarked(
  deps: SweepDeps,
  pass: SweepPass,
  progress: ReturnType<typeof heartbeats>,
  refused: Refused,
): Promise<void> {
  // 6. Held pushes still owed past their time: their digest was lost (terminated, never started) or is
  //    waiting on renewed quiet hours. Offered again, once per person: a live digest already has them.
  if (deps.pushHolds && deps.offerToDigest) {
    progress.beat({ phase: 'holds', ...pass });
    const { offered, refused } = await offerOwedHolds(deps.pushHolds, deps.offerToDigest, deps.now());
    pass.holdsOffered = offered;
    if (refused) pass.holdsRefused = refused;
  }
  // 7. Revisions won and left unfinished (the writer died before the status write or its events, or health
  //    was not told), that no caller met since: finished (their outcome goes out), or given up (a complete
  //    whose answer was never staged).
  if (deps.runTransitions && deps.finishStuckTransition) {
    progress.beat({ phase: 'transitions', ...pass });
    const finished = await finishStuckTransitions(
      deps.runTransitions,
      deps.finishStuckTransition,
      deps.now(),
    );
    if (finished) pass.transitionsFinished = finished;
  }
  // 8. Endpoints disabled for failing whose alert their disabler did not start (a crash, Temporal away).
  if (deps.endpoints && deps.endpointDisabled) {
    progress.beat({ phase: 'endpoint alerts', ...pass });
    const raised = await raiseOwedDisabledAlerts(deps.endpoints, deps.endpointDisabled, deps.now(), refused);
    if (raised) pass.disabledAlertsRaised = raised;
  }
}

/** The endpoint_disabled alerts one pass starts at most (each a Temporal start). */
const DISABLED_ALERTS_PER_PASS = 100;

/**
 * Endpoints' disabled alerts still owed past their grace: started (a running or sent one is not doubled). Answers
 * how many were; a refused one stays owed.
 */
async function raiseOwedDisabledAlerts(
  endpoints: EndpointStore,
  raise: EndpointDisabledRaiser,
  now: Date,
  refused: Refused,
): Promise<number> {
  const owing = await endpoints.owingDisabledAlerts(now, DISABLED_ALERTS_PER_PASS);
  let raised = 0;
  await mapBounded(owing, START_LANES, async (endpoint) => {
    if (!(await raise(endpoint, endpoint.disabling).then(() => true, refused))) return;
    await endpoints.disabledAlertStarted(endpoint._id, endpoint.disabling.disabledAt);
    raised++;
  });
  return raised;
}

/** A team's endpoints, read once a pass. */
type TeamEndpoints = (teamId: string) => Promise<EndpointRow[]>;

function teamEndpoints(endpoints: EndpointStore): TeamEndpoints {
  const byTeam = new Map<string, Promise<EndpointRow[]>>();
  return (teamId) => {
    let listed = byTeam.get(teamId);
    if (!listed) byTeam.set(teamId, (listed = endpoints.listForTeam(teamId)));
    return listed;
  };
}

/**
 * The page's pauses under the standby veto whose team event an endpoint is owed and that was never recorded (the
 * sweep replays no vetoed pause, so one whose emit failed would never reach the endpoints): raised. One read of
 * the events, only for a page with such a pause and an endpoint owed it. Answers how many were raised.
 */
async function announceVetoedPauses(
  deps: SweepDeps,
  teamEvents: TeamEventStore,
  endpointsOf: TeamEndpoints,
  events: TeamEvent[],
  refused: Refused,
): Promise<number> {
  const owed: TeamEvent[] = [];
  for (const event of events) {
    const happened = Date.parse(event.occurredAt);
    const endpoints = await endpointsOf(event.teamId);
    if (endpoints.some((endpoint) => subscribedWhen(endpoint, event.type, happened))) owed.push(event);
  }
  if (!owed.length) return 0;
  // Pause events are small: read whole.
  const recorded = new Set((await teamEvents.getMany(owed.map((event) => event.id))).map((row) => row._id));
  let raised = 0;
  await mapBounded(
    owed.filter((event) => !recorded.has(event.id)),
    START_LANES,
    async (event) => {
      if (await raiseTeamEvent(deps.client, deps.taskQueue, event).catch(refused)) raised++;
    },
  );
  return raised;
}

/**
 * Team events of the window that an endpoint is owed and holds no claim of: their workflow released the delivery
 * (its attempts failed on our side) or never ran. Raised again (a running one is left alone; the claims of a new
 * one skip what was delivered). Owed: owedTeamEvent. Answers how many were raised.
 */
async function raiseOwedTeamEvents(
  deps: SweepDeps,
  teamEvents: TeamEventStore,
  endpointsOf: TeamEndpoints,
  since: Date,
  marked: Set<string>,
  refused: Refused,
): Promise<number> {
  const perPass = deps.teamEventsPerPass ?? TEAM_EVENTS_PER_PASS;
  const owed: TeamEventHeader[] = [];
  for await (const page of teamEvents.recordedSince(since, deps.pageSize)) {
    for (const row of page) {
      const missing = (await endpointsOf(row.teamId)).some(
        (endpoint) =>
          owedTeamEvent(endpoint, row, row.recordedAt) &&
          !marked.has(endpointDeliveryKey(row._id, endpoint._id)),
      );
      if (missing) owed.push(row);
    }
    if (owed.length >= perPass) break;
  }
  owed.splice(perPass);
  // Listed without their bodies: the few owed are read whole, in one read.
  const whole = await teamEvents.getMany(owed.map((row) => row._id));
  let raised = 0;
  await mapBounded(whole, START_LANES, async (row) => {
    if (await raiseTeamEvent(deps.client, deps.taskQueue, teamEventOf(row)).catch(refused)) raised++;
  });
  return raised;
}

/**
 * Team events recorded before the window whose delivery was released since the range began (a raise late in the
 * window whose schedule failed again): raised while their first release is inside the window, and past it given
 * up once nothing released them for RELEASED_QUIET_SECONDS, as the episodes of releasedOutsideWindow. A release
 * for an endpoint no longer owed the event (disabled or given other types since: a recover's failed send) is given
 * up at once: a raise would not reach it, and would be made again every pass. An event older than half the claims'
 * retention is only given up: raised, it could reach again an endpoint whose settled claim expired (it is its
 * endpoint's recover's). Reads: the events' headers by id, then the few raised whole; none without such releases.
 */
async function releasedTeamEventsOutsideWindow(
  deps: SweepDeps,
  teamEvents: TeamEventStore,
  endpointsOf: TeamEndpoints,
  released: ReleasedTeamDelivery[],
  since: Date,
  marked: Set<string>,
  refused: Refused,
): Promise<{ raised: number; gaveUp: number }> {
  // Per event: the endpoints released and still in no one's hand, its first release and its last.
  const byEvent = new Map<string, { endpointIds: string[]; first: number; last: number }>();
  for (const { eventId, endpointId, firstReleasedAt, lastReleasedAt } of released) {
    if (marked.has(endpointDeliveryKey(eventId, endpointId))) continue;
    const seen = byEvent.get(eventId) ?? { endpointIds: [], first: Infinity, last: 0 };
    byEvent.set(eventId, {
      endpointIds: [...seen.endpointIds, endpointId],
      first: Math.min(firstReleasedAt.getTime(), seen.first),
      last: Math.max(lastReleasedAt.getTime(), seen.last),
    });
  }
  if (!byEvent.size) return { raised: 0, gaveUp: 0 };
  // Those recorded inside the window are raiseOwedTeamEvents': read past, a pass's worth of the others kept.
  const longestReleased = [...byEvent.keys()].sort((a, b) => byEvent.get(a)!.first - byEvent.get(b)!.first);
  const outside: TeamEventHeader[] = [];
  for (
    let from = 0;
    from < longestReleased.length && outside.length < RELEASED_PER_PASS;
    from += RELEASED_PER_PASS
  ) {
    const rows = await teamEvents.headersOf(longestReleased.slice(from, from + RELEASED_PER_PASS));
    outside.push(...rows.filter((row) => row.recordedAt < since));
  }
  outside.splice(RELEASED_PER_PASS);
  const now = deps.now().getTime();
  const raisedSince = now - RAISED_AGAIN_WITHIN_SECONDS * 1000;
  const quietSince = now - RELEASED_QUIET_SECONDS * 1000;
  const raise: string[] = [];
  const giveUp: { keys: string[]; result: string }[] = [];
  for (const row of outside) {
    const releases = byEvent.get(row._id)!;
    const endpoints = await endpointsOf(row.teamId);
    const stillOwed = (endpointId: string) =>
      endpoints.some((e) => e._id === endpointId && owedTeamEvent(e, row, row.recordedAt));
    const keyOf = (endpointId: string) => endpointDeliveryKey(row._id, endpointId);
    const notOwed = releases.endpointIds.filter((id) => !stillOwed(id));
    if (notOwed.length) giveUp.push({ keys: notOwed.map(keyOf), result: RELEASED_NOT_OWED });
    const owed = releases.endpointIds.filter(stillOwed);
    if (!owed.length) continue;
    if (releases.first >= since.getTime() && row.recordedAt.getTime() >= raisedSince) raise.push(row._id);
    else if (releases.last < quietSince) giveUp.push({ keys: owed.map(keyOf), result: RELEASED_PAST_REACH });
  }
  let raised = 0;
  await mapBounded(await teamEvents.getMany(raise), START_LANES, async (row) => {
    if (await raiseTeamEvent(deps.client, deps.taskQueue, teamEventOf(row)).catch(refused)) raised++;
  });
  let gaveUp = 0;
  await mapBounded(giveUp, START_LANES, async ({ keys, result }) => {
    if (await giveUpKeys(deps.claims, keys, result)) gaveUp++;
  });
  return { raised, gaveUp };
}

/** gRPC's DEADLINE_EXCEEDED and UNAVAILABLE: Temporal away, no verdict on one start or signal. */
const TEMPORAL_AWAY_CODES = new Set([4, 14]);

/** The gRPC code Temporal answered a call with; undefined when it did not answer (or the error is another's). */
const grpcCodeOf = (err: unknown): number | undefined => {
  const cause = err instanceof ServiceError ? err.cause : err;
  return isGrpcServiceError(cause) ? cause.code : undefined;
};

/** Temporal throttled the call (RESOURCE_EXHAUSTED: its rate limits, a busy workflow): worth asking again later. */
const isThrottled = (err: unknown): boolean => grpcCodeOf(err) === 8;

/**
 * A call's failure handler: Temporal answered and refused the call (the workflow's limits, its id), the
 * workflow's own and not an outage's, answers `refused()`; anything else (Temporal away) is thrown again.
 */
const unlessRefused =
  <T>(refused: () => T) =>
  (err: unknown): T => {
    const code = grpcCodeOf(err);
    if (code === undefined || TEMPORAL_AWAY_CODES.has(code)) throw err;
    return refused();
  };

/**
 * Offers each person's owed holds to their digest (the newest as its entry; the digest takes every owed row when it
 * sends), then leaves them an hour before the next offer. A digest that refuses the offer (Temporal refuses its
 * signals) is left the same hour: its rows sort first by age, and offered again every pass they would fill the pass
 * and fail it for everyone. Temporal away fails the pass, retried as before. Answers how many holds were offered,
 * and how many of them were refused.
 */
async function offerOwedHolds(
  holds: PushHoldStore,
  offer: NonNullable<SweepDeps['offerToDigest']>,
  now: Date,
): Promise<{ offered: number; refused: number }> {
  const owed = await holds.owedBefore(now, HOLDS_PER_PASS);
  const byPerson = new Map<string, PushHoldRow[]>();
  for (const row of owed) {
    const key = JSON.stringify([row.teamId, row.userId]);
    const rows = byPerson.get(key);
    if (rows) rows.push(row);
    else byPerson.set(key, [row]);
  }
  let refused = 0;
  await mapBounded([...byPerson.values()], START_LANES, async (rows) => {
    const newest = rows.reduce((a, b) => (b.at > a.at ? b : a));
    // Its prefs may have changed since, untold (the prefs route's signal lost): the digest reads them again.
    await offer(newest.teamId, newest.userId, { ...digestEntryOf(newest), rereadPrefs: true }).catch(
      unlessRefused(() => void (refused += rows.length)),
    );
    await holds.deferOffer(
      rows.map((row) => row._id),
      new Date(now.getTime() + HOLD_REOFFER_AFTER_SECONDS * 1000),
    );
  });
  return { offered: owed.length, refused };
}

/**
 * The transitions still open past the time a live writer takes to finish one: their writer died between the win and
 * the status write (or after it, before settling the row). Each finished through the runs service; one that fails
 * is left for the next pass and holds back no other. Answers how many were finished.
 */
async function finishStuckTransitions(
  transitions: RunTransitionStore,
  finish: NonNullable<SweepDeps['finishStuckTransition']>,
  now: Date,
): Promise<number> {
  const before = new Date(now.getTime() - STUCK_TRANSITION_GRACE_SECONDS * 1000);
  const open = await transitions.listOpenBefore(before, TRANSITIONS_PER_PASS);
  let finished = 0;
  await mapBounded(open, START_LANES, async (t) => {
    if (await finish(t.runId, t.revision).catch(() => false)) finished++;
  });
  return finished;
}

/**
 * Heartbeats for a sweep activity: one per page with the pass's progress, and a keep-alive while one query runs
 * long, so a worker that dies mid-pass (SIGKILL, OOM, lost host) is noticed within the heartbeat timeout instead
 * of the start-to-close timeout, and the schedule (overlap SKIP) is not held by a sweep nobody is running.
 * A no-op when called outside an activity (the bench calls sweepOnce directly).
 */
function heartbeats(): { beat(progress: SweepProgress): void; stop(): void } {
  const context = activityContext();
  if (!context) return { beat: () => undefined, stop: () => undefined };
  const active = context;
  let last: SweepProgress | undefined;
  const keepalive = setInterval(() => active.heartbeat(last), KEEPALIVE_MS);
  return {
    beat(progress) {
      last = progress;
      active.heartbeat(progress);
    },
    stop: () => clearInterval(keepalive),
  };
}
