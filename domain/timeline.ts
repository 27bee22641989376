// A run's timeline of its pauses as people lived them: asked, notified on each device, shown, clicked, an action
// taken, answered. Each source of entries has its own small mapper and the timeline is their merge in time order,
// so a new source (escalation's rungs) is one more mapper, with no change to the others or to the readers.
// Pure: the reads are api/timelineView.ts's.
import { headUnits } from './text';

/** The most of a prompt, an answer or a rung's addressees an entry shows. */
const DETAIL_UNITS = 200;

export type TimelineKind =
  | 'paused'
  | 'notified'
  | 'shown'
  | 'clicked'
  | 'action'
  | 'answered'
  /** An escalation rung sent (`rung`: its 1-based index, `via`); from the escalation's own records. */
  | 'rung';

export interface TimelineEntry {
  at: string;
  kind: TimelineKind;
  interactionId?: string;
  episodeId?: string;
  /** Who it was about: the person notified, who reported a receipt, who answered. */
  userId?: string;
  /** The device (a push subscription id) for notified, shown, clicked and action. */
  subscriptionId?: string;
  /** notified: whether any receipt came from the device ("none": a browser that reports nothing; never guessed). */
  receipt?: 'reported' | 'none';
  /** action: the action taken; answered: the answer. */
  detail?: string;
  rung?: number;
  via?: string;
}

export interface TimelineInteraction {
  _id: string;
  prompt: string;
  createdAt: Date;
  status: string;
  answer?: string;
  answeredAt?: Date;
  answeredBy?: string;
}

export interface TimelineDelivery {
  episodeId: string;
  interactionId: string;
  userId: string;
  subscriptionId: string;
  at: Date;
}

export interface TimelineReceipt {
  episodeId: string;
  subscriptionId: string;
  shownAt?: Date;
  clickedAt?: Date;
  actedAt?: Date;
  action?: string;
}

/** Each pause asked, and its answer with who gave it. */
export function pauseEntries(interactions: TimelineInteraction[]): TimelineEntry[] {
  return interactions.flatMap((i) => [
    {
      at: i.createdAt.toISOString(),
      kind: 'paused' as const,
      interactionId: i._id,
      detail: headUnits(i.prompt, DETAIL_UNITS).head,
    },
    ...(i.status === 'answered' && i.answeredAt
      ? [
          {
            at: i.answeredAt.toISOString(),
            kind: 'answered' as const,
            interactionId: i._id,
            ...(i.answeredBy ? { userId: i.answeredBy } : {}),
            ...(i.answer !== undefined ? { detail: headUnits(i.answer, DETAIL_UNITS).head } : {}),
          },
        ]
      : []),
  ]);
}

/** A settled rung claim (`rung|<interactionId>|<index>`): when it settled, and how (`not_addressable`: nobody). */
export interface TimelineRungClaim {
  interactionId: string;
  index: number;
  settledAt: Date;
  result?: string;
}

/** Who a rung was for and how, as its ladder says (the run's own, else the team's). */
export interface TimelineRungStep {
  to: 'team' | 'owner' | string[];
  via: string;
}

/** What a settled rung's claim says when it was not a delivery. */
const RUNG_NOT_DELIVERED: Record<string, string> = {
  not_addressable: 'reached nobody',
  held: 'held for a digest',
  gave_up: 'gave up: its sends failed',
  closed: 'not sent: answered first',
  vetoed: 'not sent: an assistant stands by',
};

/** Each settled rung: when, its 1-based place in the ladder, via what and to whom (`detail`), and how it ended. */
export function rungEntries(claims: TimelineRungClaim[], ladder: TimelineRungStep[]): TimelineEntry[] {
  return claims.map((claim) => {
    const step = ladder[claim.index];
    const to = step ? (Array.isArray(step.to) ? step.to.join(', ') : step.to) : undefined;
    const ended = claim.result ? RUNG_NOT_DELIVERED[claim.result] : undefined;
    const detail = [to && `to ${to}`, ended].filter(Boolean).join(': ');
    return {
      at: claim.settledAt.toISOString(),
      kind: 'rung' as const,
      interactionId: claim.interactionId,
      rung: claim.index + 1,
      ...(step ? { via: step.via } : {}),
      ...(detail ? { detail: headUnits(detail, DETAIL_UNITS).head } : {}),
    };
  });
}

/** Each device notified, and what its service worker reported (the earliest of each event, across retries). */
export function deviceEntries(deliveries: TimelineDelivery[], receipts: TimelineReceipt[]): TimelineEntry[] {
  return deliveries.flatMap((d) => {
    const own = receipts.filter((r) => r.episodeId === d.episodeId && r.subscriptionId === d.subscriptionId);
    const device = {
      interactionId: d.interactionId,
      episodeId: d.episodeId,
      userId: d.userId,
      subscriptionId: d.subscriptionId,
    };
    const first = (pick: (r: TimelineReceipt) => Date | undefined) =>
      own.filter((r) => pick(r)).sort((a, b) => pick(a)!.getTime() - pick(b)!.getTime())[0];
    const shown = first((r) => r.shownAt);
    const clicked = first((r) => r.clickedAt);
    const acted = first((r) => r.actedAt);
    return [
      {
        at: d.at.toISOString(),
        kind: 'notified' as const,
        ...device,
        receipt: shown || clicked || acted ? ('reported' as const) : ('none' as const),
      },
      ...(shown ? [{ at: shown.shownAt!.toISOString(), kind: 'shown' as const, ...device }] : []),
      ...(clicked ? [{ at: clicked.clickedAt!.toISOString(), kind: 'clicked' as const, ...device }] : []),
      ...(acted
        ? [{ at: acted.actedAt!.toISOString(), kind: 'action' as const, ...device, detail: acted.action }]
        : []),
    ];
  });
}

/** The sources merged, oldest first (a stable sort: a source's own order breaks ties). */
export function mergeTimeline(...sources: TimelineEntry[][]): TimelineEntry[] {
  return sources.flat().sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
}
