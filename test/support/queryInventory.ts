// Every query the service issues that is not a single-document read or write by _id: what it filters, sorts and
// limits, and the index meant to serve it. The "Queries and indexes" table of docs/development.md is this table.
// test/queryInventory.test.ts asks the server's explain about every hot entry (built from the sample values below)
// against a store holding other teams' rows; test/unit/queryInventory.test.ts fails when a store module has a
// query call without an entry here, or a single-document write not keyed by _id that has none.
import type { Document } from 'mongodb';
import { CLAIM_RETENTION_SECONDS } from '../../store/claims';

export interface QueryEntry {
  /** The store module (store/<module>.ts) whose method issues it, and the method. */
  module: string;
  method: string;
  collection: string;
  /**
   * How the driver is called (countDocuments, deleteMany and updateMany narrow their rows as find does; a
   * single-document write is listed only when its filter is not an _id literal in the source).
   */
  op: 'find' | 'findOne' | 'countDocuments' | 'deleteMany' | 'updateMany' | 'deleteOne' | 'updateOne';
  /** A filter of the query's shape, with the sample values below. */
  filter: Document;
  sort?: Document;
  limit?: number;
  /** The index meant to serve it: a name from the module's IndexSpec list, `_id_`, or `none`. */
  index: string;
  /** On a request, fan-out or sweep path: its cost must follow the rows it returns, never the rows stored. */
  hot: boolean;
  note: string;
  /** Call sites in the module that issue this same query (1 unless said). */
  sites?: number;
}

/** Representative values: the team, user, run and times the inventory's queries are asked about. */
export const SAMPLE = {
  teamId: 'team_sample',
  userId: 'user_sample',
  otherUserId: 'user_sample_2',
  runId: 'run_sample',
  episodeId: 'run_sample:end',
  subscriptionId: 'a'.repeat(64),
  rateKey: 'push-test|user_sample',
  /** "Now" for the sample: every time bound below is derived from it. */
  now: new Date('2026-12-01T12:00:00Z'),
  /** A page's cursor time (its last row's). */
  cursorAt: new Date('2026-12-01T11:00:00Z'),
} as const;

const SAMPLE_DIGEST = `digest|digest|${SAMPLE.teamId}|${SAMPLE.userId}|0a1b2c3d.1`;
const minutesAgo = (minutes: number): Date => new Date(SAMPLE.now.getTime() - minutes * 60_000);
const retentionCutoff = new Date(SAMPLE.now.getTime() - CLAIM_RETENTION_SECONDS * 1000);
/** A page of 50 rows, read as limit + 2 (one past the page, and the cursor's own row). */
const PAGE_READ = 52;

export const QUERY_INVENTORY: QueryEntry[] = [
  // runs
  {
    module: 'runs',
    method: 'listForTeam',
    collection: 'runs',
    op: 'find',
    filter: { teamId: SAMPLE.teamId, createdAt: { $lte: SAMPLE.cursorAt } },
    sort: { createdAt: -1, _id: -1 },
    limit: PAGE_READ,
    index: 'team_created',
    hot: true,
    note: 'GET /runs, a later page (the first has no createdAt bound); through pageNewestFirst',
  },
  {
    module: 'runs',
    method: 'listNotifiableRefs',
    collection: 'runs',
    op: 'find',
    filter: {
      updatedAt: { $gte: minutesAgo(10) },
      status: { $in: ['paused', 'finished', 'failed', 'cancelled'] },
    },
    index: 'updated_at',
    hot: true,
    note: 'the sweep: runs changed in its window (one cursor, a batch per page: pages + 1 round trips)',
  },
  // episodes
  {
    module: 'episodes',
    method: 'listForRun',
    collection: 'episodes',
    op: 'find',
    filter: { runId: SAMPLE.runId, teamId: SAMPLE.teamId, recordedAt: { $lte: SAMPLE.cursorAt } },
    sort: { recordedAt: -1, _id: -1 },
    limit: PAGE_READ,
    index: 'run_recorded',
    hot: true,
    note: 'GET /runs/:id/episodes, a later page; teamId is checked after the narrowed read; through pageNewestFirst',
  },
  {
    module: 'episodes',
    method: 'listForRunAnyTeam',
    collection: 'episodes',
    op: 'find',
    filter: { runId: SAMPLE.runId },
    sort: { recordedAt: 1, _id: 1 },
    limit: 101,
    index: 'run_recorded',
    hot: false,
    note: 'flow-notify explain (operators)',
  },
  // endpoints, endpoint_slots, team_events
  {
    module: 'endpoint/endpoints',
    method: 'listForTeam, create',
    collection: 'endpoints',
    op: 'find',
    filter: { teamId: SAMPLE.teamId },
    sort: { createdAt: 1 },
    index: 'team_created',
    hot: true,
    note: "GET /endpoints, a create (the slots' endpoints) and every team event (the team's subscribers)",
  },
  {
    module: 'endpoint/endpoints',
    method: 'create',
    collection: 'endpoint_slots',
    op: 'find',
    filter: { key: SAMPLE.teamId },
    index: 'team',
    hot: true,
    note: "POST /endpoints: the team's slots (the ENDPOINTS_PER_TEAM cap)",
  },
  {
    module: 'endpoint/endpoints',
    method: 'create (takeSlot)',
    collection: 'endpoint_slots',
    op: 'find',
    filter: { key: { $in: [SAMPLE.teamId] } },
    index: 'team',
    hot: true,
    note: 'POST /endpoints: the slot just taken, read again (store/slots.ts takeSlots)',
  },
  {
    module: 'endpoint/teamEvents',
    method: 'listForTeam',
    collection: 'team_events',
    op: 'find',
    filter: { teamId: SAMPLE.teamId, recordedAt: { $gte: minutesAgo(600), $lt: SAMPLE.now } },
    sort: { recordedAt: 1, _id: 1 },
    limit: 50_000,
    index: 'team_recorded',
    hot: true,
    note: "an endpoint's recover: the team's events in its window, oldest first",
  },
  {
    module: 'endpoint/teamEvents',
    method: 'reapExpired',
    collection: 'team_events',
    op: 'deleteMany',
    filter: { recordedAt: { $lt: retentionCutoff } },
    index: 'recorded_ttl',
    hot: true,
    note: "the sweep's reaper (FerretDB v1 has no TTL)",
  },
  // callback_attempts
  {
    module: 'callback/attempts',
    method: 'listForRun',
    collection: 'callback_attempts',
    op: 'find',
    filter: { runId: SAMPLE.runId },
    sort: { at: -1, _id: -1 },
    limit: 201,
    index: 'run_recent',
    hot: false,
    note: 'flow-notify explain (operators): the newest attempts of the run',
  },
  {
    module: 'callback/attempts',
    method: 'listForEpisode',
    collection: 'callback_attempts',
    op: 'find',
    filter: { episodeId: SAMPLE.episodeId },
    sort: { at: -1, _id: -1 },
    limit: 1001,
    index: 'episode_recent',
    hot: true,
    note:
      'the attempt log of each episode on a page of GET /runs/:id/episodes (newest 1,000); a recover, for each ' +
      'give-up, whether it was re-sent lately (newest 50)',
  },
  {
    module: 'callback/attempts',
    method: 'countForEpisode',
    collection: 'callback_attempts',
    op: 'countDocuments',
    filter: { episodeId: SAMPLE.episodeId },
    index: 'episode_recent',
    hot: true,
    note: "a redelivery's first guess at its attempt number",
  },
  {
    module: 'callback/attempts',
    method: 'listGaveUp',
    collection: 'callback_attempts',
    op: 'find',
    filter: { teamId: SAMPLE.teamId, gaveUp: true, at: { $gte: minutesAgo(600), $lt: SAMPLE.now } },
    sort: { at: 1, _id: 1 },
    limit: 101,
    index: 'team_gave_up',
    hot: true,
    note: "a recover's page of the team's give-ups in its window (POST /callbacks/recover), oldest first",
  },
  {
    module: 'callback/attempts',
    method: 'reapExpired',
    collection: 'callback_attempts',
    op: 'deleteMany',
    filter: { at: { $lt: retentionCutoff } },
    index: 'at_ttl',
    hot: true,
    note: "the sweep's reaper, every pass where the server has no TTL index (FerretDB v1)",
  },
  // push_subscriptions
  {
    module: 'push/subscriptions',
    method: 'register, reclaimAbandoned',
    collection: 'push_subscriptions',
    op: 'find',
    filter: { userId: SAMPLE.userId },
    index: 'user_created',
    hot: true,
    note: "subscribe: the user's rows and the slots they name (the per-user cap)",
    sites: 2,
  },
  {
    module: 'push/subscriptions',
    method: 'takeUserSlot, reclaimAbandoned',
    collection: 'push_subscription_slots',
    op: 'find',
    filter: { key: SAMPLE.userId },
    index: 'user',
    hot: true,
    note: "subscribe: the user's slots",
    sites: 2,
  },
  {
    module: 'push/subscriptions',
    method: 'takeUserSlot (takeSlot)',
    collection: 'push_subscription_slots',
    op: 'find',
    filter: { key: { $in: [SAMPLE.userId] } },
    index: 'user',
    hot: true,
    note: "subscribe: the slot just taken, read again (store/slots.ts takeSlots: the key's rows, slot checked after)",
  },
  {
    module: 'push/subscriptions',
    method: 'removeSubscription',
    collection: 'push_subscriptions',
    op: 'findOne',
    filter: { _id: SAMPLE.subscriptionId, userId: SAMPLE.userId },
    index: '_id_',
    hot: true,
    note: 'removing a device or pruning an endpoint: the filter is passed in, always by _id',
  },
  {
    module: 'push/subscriptions',
    method: 'removeSubscription',
    collection: 'push_subscriptions',
    op: 'deleteOne',
    filter: { _id: SAMPLE.subscriptionId, userId: SAMPLE.userId },
    index: '_id_',
    hot: true,
    note: 'the same filter',
  },
  {
    module: 'push/subscriptions',
    method: 'listForUsers',
    collection: 'push_subscriptions',
    op: 'find',
    filter: { userId: { $in: [SAMPLE.userId, SAMPLE.otherUserId] } },
    index: 'user_created',
    hot: true,
    note: "the fan-out: every recipient's devices in one read",
  },
  {
    module: 'push/subscriptions',
    method: 'listForUser',
    collection: 'push_subscriptions',
    op: 'find',
    filter: { userId: SAMPLE.userId, createdAt: { $lte: SAMPLE.cursorAt } },
    sort: { createdAt: -1, _id: -1 },
    limit: PAGE_READ,
    index: 'user_created',
    hot: true,
    note: 'the device list, a later page; through pageNewestFirst',
  },
  {
    module: 'push/subscriptions',
    method: 'recordSuccess',
    collection: 'push_subscriptions',
    op: 'updateMany',
    filter: { _id: { $in: [SAMPLE.subscriptionId] } },
    index: '_id_',
    hot: true,
    note: "the fan-out: each batch's devices' lastSuccessAt, one write",
  },
  {
    module: 'push/subscriptions',
    method: 'endpointsByIds',
    collection: 'push_subscriptions',
    op: 'find',
    filter: { _id: { $in: [SAMPLE.subscriptionId] } },
    index: '_id_',
    hot: false,
    note: 'flow-notify explain (operators)',
  },
  // notification_prefs
  {
    module: 'push/notificationPrefs',
    method: 'migrateNotificationPrefs',
    collection: 'notification_prefs',
    op: 'find',
    filter: { userId: { $exists: false } },
    index: 'none',
    hot: false,
    note: 'start-up migration of rows keyed before prefs were per team: reads the whole collection once per start',
  },
  {
    module: 'push/notificationPrefs',
    method: 'listTeamWide',
    collection: 'notification_prefs',
    op: 'find',
    filter: { teamId: SAMPLE.teamId, scope: 'team' },
    index: 'team_scope',
    hot: false,
    note: 'library surface (not called by the service)',
  },
  {
    module: 'push/notificationPrefs',
    method: 'listRecipientPrefs',
    collection: 'notification_prefs',
    op: 'find',
    filter: { teamId: SAMPLE.teamId, $or: [{ scope: 'team' }, { userId: SAMPLE.userId }] },
    index: 'team_scope',
    hot: true,
    note: "the fan-out's recipients: the team's rows, $or checked after the narrowed read",
  },
  // action_tokens
  {
    module: 'actionTokens',
    method: 'reapExpired',
    collection: 'action_tokens',
    op: 'deleteMany',
    filter: { expiresAt: { $lte: retentionCutoff } },
    index: 'expires_ttl',
    hot: true,
    note: "the sweep's reaper (FerretDB v1 has no TTL): tokens kept a week past their expiry",
  },
  // rate_limits
  {
    module: 'rateLimits',
    method: 'hitMany (hit)',
    collection: 'rate_limits',
    op: 'find',
    filter: { _id: { $in: [`window|${SAMPLE.rateKey}`, `hit|${SAMPLE.rateKey}|${SAMPLE.episodeId}`] } },
    index: '_id_',
    hot: true,
    note:
      "every rate-limited request, and a push's burst count (every recipient's key at once): each key's window " +
      'row and its hit row, whatever the limit or the hits counted',
  },
  {
    module: 'rateLimits',
    method: 'reapExpired',
    collection: 'rate_limits',
    op: 'deleteMany',
    filter: { expiresAt: { $lte: SAMPLE.now } },
    index: 'expires_ttl',
    hot: true,
    note: "the sweep's reaper (FerretDB v1 has no TTL)",
  },
  // assistant_run_watches
  {
    module: 'watches',
    method: 'exists',
    collection: 'assistant_run_watches',
    op: 'countDocuments',
    filter: { _id: `asst_1|${SAMPLE.runId}`, teamId: SAMPLE.teamId },
    index: '_id_',
    hot: true,
    note: 'DELETE of a watch (limit 1)',
  },
  {
    module: 'watches',
    method: 'hasActiveWatch',
    collection: 'assistant_run_watches',
    op: 'countDocuments',
    filter: { runId: SAMPLE.runId, active: true, teamId: SAMPLE.teamId },
    index: 'run_active',
    hot: true,
    note: 'the standby veto, every pause push (limit 1)',
  },
  {
    module: 'watches',
    method: 'migrateWatchesOntoRuns',
    collection: 'assistant_run_watches',
    op: 'find',
    filter: { active: true, onRun: { $ne: true } },
    index: 'none',
    hot: false,
    note: 'start-up: copies watches written before runs carried them; reads the whole collection once per start',
  },
  // sent_notifications
  {
    module: 'claims',
    method: 'wasDelivered',
    collection: 'sent_notifications',
    op: 'countDocuments',
    filter: { _id: SAMPLE.episodeId, delivered: true },
    index: '_id_',
    hot: true,
    note: 'certifying side state off a settled claim (limit 1)',
  },
  {
    module: 'claims',
    method: 'markedSince',
    collection: 'sent_notifications',
    op: 'find',
    filter: { sent_at: { $gte: minutesAgo(70) } },
    index: 'sent_at_ttl',
    hot: true,
    note: "the sweep's claims pre-check: the claims written in its window (and an hour's slack), one read",
  },
  {
    module: 'claims',
    method: 'reapExpired',
    collection: 'sent_notifications',
    op: 'deleteMany',
    filter: { sent_at: { $lt: retentionCutoff } },
    index: 'sent_at_ttl',
    hot: true,
    note: "the sweep's reaper (FerretDB v1 has no TTL)",
  },
  {
    module: 'claims',
    method: 'byKeys',
    collection: 'sent_notifications',
    op: 'find',
    filter: { _id: { $in: [SAMPLE.episodeId, `cb|${SAMPLE.episodeId}`] } },
    index: '_id_',
    hot: false,
    note: 'flow-notify explain (operators)',
  },
  {
    module: 'claims',
    method: 'byPrefix',
    collection: 'sent_notifications',
    op: 'find',
    filter: { _id: { $gte: `ops|health:${SAMPLE.runId}:`, $lt: `ops|health:${SAMPLE.runId};` } },
    sort: { _id: 1 },
    limit: 51,
    index: '_id_',
    hot: false,
    note: "flow-notify explain (operators): one run's alert claims, an _id range",
  },
  // push_deliveries (as the store is on main)
  {
    module: 'push/deliveries',
    method: 'deliveredSubscriptions',
    collection: 'push_deliveries',
    op: 'find',
    filter: { _id: { $in: [`${SAMPLE.episodeId}|${SAMPLE.subscriptionId}`] } },
    index: '_id_',
    hot: true,
    note: 'the fan-out: endpoints this episode already reached',
  },
  {
    module: 'push/deliveries',
    method: 'lastSuccess',
    collection: 'push_deliveries',
    op: 'findOne',
    filter: { subscriptionId: SAMPLE.subscriptionId },
    sort: { at: -1 },
    limit: 1,
    index: 'subscription_at',
    hot: true,
    note: "the device list: a device's newest push on rows of the old shape (newer ones: lastSuccessAt on its row)",
  },
  {
    module: 'push/deliveries',
    method: 'countForEpisode, listForEpisode',
    collection: 'push_deliveries',
    op: 'find',
    filter: { episodeId: SAMPLE.episodeId },
    index: 'episode',
    hot: true,
    note: "GET /runs/:id/episodes (each episode's batch rows) and flow-notify explain",
    sites: 2,
  },
  {
    module: 'push/deliveries',
    method: 'reapExpired',
    collection: 'push_deliveries',
    op: 'deleteMany',
    filter: { at: { $lt: retentionCutoff } },
    index: 'at_ttl',
    hot: true,
    note: "the sweep's reaper (FerretDB v1 has no TTL)",
  },
  // push_holds
  {
    module: 'push/holds',
    method: 'heldOf',
    collection: 'push_holds',
    op: 'find',
    filter: { _id: { $in: [`${SAMPLE.episodeId}|${SAMPLE.userId}`] } },
    index: '_id_',
    hot: true,
    note: 'the fan-out: recipients an earlier attempt of this episode held for their digest',
  },
  {
    module: 'push/holds',
    method: 'markSent',
    collection: 'push_holds',
    op: 'updateMany',
    filter: { _id: { $in: [`${SAMPLE.episodeId}|${SAMPLE.userId}`] } },
    index: '_id_',
    hot: true,
    note: 'a digest sent: the holds it went out with',
  },
  {
    module: 'push/holds',
    method: 'take',
    collection: 'push_holds',
    op: 'findOne',
    filter: { digestId: SAMPLE_DIGEST },
    index: 'digest',
    hot: true,
    note: 'a digest sending: whether it took its holds already (a retry sends what it took)',
  },
  {
    module: 'push/holds',
    method: 'take',
    collection: 'push_holds',
    op: 'updateMany',
    filter: {
      teamId: SAMPLE.teamId,
      userId: SAMPLE.userId,
      at: { $lte: SAMPLE.now },
      digestSentAt: { $exists: false },
      digestGaveUpAt: { $exists: false },
      $or: [{ digestId: { $exists: false } }, { takenUntil: { $lte: SAMPLE.now } }],
    },
    index: 'person',
    hot: true,
    note: "a digest's first send: the person's owed holds, taken",
  },
  {
    module: 'push/holds',
    method: 'contentsOf',
    collection: 'push_holds',
    op: 'find',
    filter: { digestId: SAMPLE_DIGEST },
    index: 'digest',
    hot: true,
    note: 'what a digest took, counted and its newest listed',
  },
  {
    module: 'push/holds',
    method: 'markDigestSent',
    collection: 'push_holds',
    op: 'updateMany',
    filter: { digestId: SAMPLE_DIGEST },
    index: 'digest',
    hot: true,
    note: 'a device took the digest: its holds are no longer owed',
  },
  {
    module: 'push/holds',
    method: 'markDigestGaveUp',
    collection: 'push_holds',
    op: 'updateMany',
    filter: { digestId: SAMPLE_DIGEST, digestSentAt: { $exists: false }, digestGaveUpAt: { $exists: false } },
    index: 'digest',
    hot: true,
    note: 'no device took the digest for a day: its holds say it gave up',
  },
  {
    module: 'push/holds',
    method: 'owedBefore',
    collection: 'push_holds',
    op: 'find',
    filter: { owedAt: { $lte: SAMPLE.now } },
    sort: { owedAt: 1 },
    limit: 1000,
    index: 'owed',
    hot: true,
    note: 'the sweep: held pushes still owed past their time, offered to their digest again',
  },
  {
    module: 'push/holds',
    method: 'deferOffer',
    collection: 'push_holds',
    op: 'updateMany',
    filter: {
      _id: { $in: [`${SAMPLE.episodeId}|${SAMPLE.userId}`] },
      digestSentAt: { $exists: false },
      digestGaveUpAt: { $exists: false },
    },
    index: '_id_',
    hot: true,
    note: 'the sweep: offered holds wait an hour before the next offer',
  },
  {
    module: 'push/holds',
    method: 'listForRun',
    collection: 'push_holds',
    op: 'find',
    filter: { runId: SAMPLE.runId },
    index: 'run',
    hot: true,
    note: 'GET /runs/:id/episodes and flow-notify explain: who was held, in which digest',
  },
  {
    module: 'push/holds',
    method: 'reapExpired',
    collection: 'push_holds',
    op: 'deleteMany',
    filter: { at: { $lte: retentionCutoff } },
    index: 'at_ttl',
    hot: true,
    note: "the sweep's reaper (FerretDB v1 has no TTL)",
  },
  // events
  {
    module: 'events',
    method: 'listForRun',
    collection: 'events',
    op: 'find',
    filter: { runId: SAMPLE.runId },
    sort: { at: 1 },
    index: 'run_timeline',
    hot: false,
    note: "a run's whole event stream (tests and diagnostics only)",
  },
];

/** The table as docs/development.md shows it (test/unit/queryInventory.test.ts keeps the two the same). */
export function inventoryMarkdown(entries: QueryEntry[] = QUERY_INVENTORY): string {
  const shape = (doc: Document | undefined): string => (doc ? JSON.stringify(shapeOf(doc)) : '');
  const rows = entries.map((e) =>
    [
      `\`${e.collection}\``,
      `\`${e.module}.${e.method}\``,
      e.op,
      `\`${shape(e.filter)}\``,
      e.sort ? `\`${shape(e.sort)}\`` : '',
      e.limit !== undefined ? 'yes' : '',
      e.index === 'none' ? 'none' : `\`${e.index}\``,
      e.hot ? 'hot' : '',
      e.note,
    ].join(' | '),
  );
  return [
    '| collection | issued by | op | filter | sort | limit | index | hot | note |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows.map((row) => `| ${row} |`),
  ].join('\n');
}

/** A filter's shape: each value replaced by what it is (`=`, `$in`, a range), so the table does not age. */
function shapeOf(doc: Document): Document {
  return Object.fromEntries(
    Object.entries(doc).map(([key, value]) => {
      if (key === '$or' && Array.isArray(value)) return [key, value.map((d: Document) => shapeOf(d))];
      if (typeof value === 'number' && (value === 1 || value === -1)) return [key, value];
      if (value && typeof value === 'object' && !(value instanceof Date) && !Array.isArray(value))
        return [key, Object.fromEntries(Object.keys(value as Document).map((op) => [op, '…']))];
      return [key, '…'];
    }),
  );
}
