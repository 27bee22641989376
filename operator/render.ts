// flow-notify explain's human-readable form: the same RunExplanation as --json, laid out for a person.
import { printable } from '../platform/printable';
import type {
  AlertSendView,
  CallbackAttemptView,
  ClaimView,
  DeviceReceiptView,
  EpisodeView,
  PushDeliveryView,
  RunExplanation,
} from './explanation';

type Line = (s?: string) => void;

const claim = (c: ClaimView): string =>
  c.state === 'absent'
    ? 'absent (never claimed, released, or expired)'
    : c.state === 'pending'
      ? `pending since ${c.at} (${c.holder})`
      : `${c.result} at ${c.at}`;

export function renderExplanation(x: RunExplanation): string {
  const out: string[] = [];
  // Every line escaped whole: titles, errors and ids are tenant data.
  const line: Line = (s = '') => void out.push(printable(s));
  renderRun(x, line);
  line();
  line(`episodes (${x.episodes.length}${x.truncated.episodes ? ', more not shown' : ''})`);
  for (const e of x.episodes) renderEpisode(e, x.truncated.callbackAttempts, line);
  line();
  renderAlerts(x, line);
  line();
  renderWorkflows(x, line);
  return out.join('\n') + '\n';
}

function renderRun(x: RunExplanation, line: Line): void {
  if (x.run) {
    line(`run ${x.runId} "${x.run.title}": ${x.run.status} (team ${x.run.teamId}, owner ${x.run.ownerId})`);
    line(`  created ${x.run.createdAt}${x.run.endedAt ? `, ended ${x.run.endedAt}` : ''}`);
    if (x.run.callbackOrigin) line(`  callback receiver ${x.run.callbackOrigin}`);
  } else {
    line(`run ${x.runId}: not in the runs store (only its workflows remain)`);
  }
}

function renderEpisode(e: EpisodeView, attemptsTruncated: boolean, line: Line): void {
  line(`- ${e.episodeId}${e.kind ? ` [${e.kind}]` : ''}${e.recordedAt ? ` recorded ${e.recordedAt}` : ''}`);
  if (e.branches) {
    line(
      `    workflow result: ${Object.entries(e.branches)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
  }
  for (const family of ['push', 'callback', 'ops'] as const) {
    line(`    ${family.padEnd(8)} claim ${claim(e.families[family])}`);
  }
  const pushes = (title: string, views: (PushDeliveryView & { followUp?: string })[], truncated: boolean) => {
    if (!views.length) return;
    line(`    ${title} (${views.length}${truncated ? '+' : ''}):`);
    for (const d of views) {
      const what = d.followUp ? `${d.followUp} ` : '';
      const via = d.pushService ?? '(subscription pruned)';
      line(`      ${d.at} ${what}to ${d.userId} via ${via} sub ${d.subscriptionId.slice(0, 12)}…`);
      line(`        ${seenOnDevice(d)}`);
    }
  };
  pushes('push deliveries', e.pushDeliveries, e.pushDeliveriesTruncated);
  pushes('follow-up pushes', e.followUpPushes, e.followUpPushesTruncated);
  if (e.pushHeld.length) {
    line(`    held for a digest (${e.pushHeld.length}${e.pushHeldTruncated ? '+' : ''}):`);
    for (const h of e.pushHeld) {
      const sent = h.digestSentAt
        ? `went out in ${h.digestId} at ${h.digestSentAt}`
        : h.digestGaveUpAt
          ? `digest ${h.digestId} gave up at ${h.digestGaveUpAt}: no device took it for a day`
          : h.optedOutAt
            ? `opted out at ${h.optedOutAt} (its kind turned off, or own runs only): not told`
            : h.digestId
              ? `digest ${h.digestId} is sending`
              : `digest waits (release ${h.releaseAt})`;
      line(`      ${h.heldAt} ${h.userId} (${h.reason}): ${sent}`);
    }
  }
  if (e.callbackAttempts.length) {
    const cut = attemptsTruncated ? ', older ones not shown' : '';
    line(`    callback attempts (${e.callbackAttempts.length}${cut}):`);
    for (const a of e.callbackAttempts) line(`      ${callbackAttempt(a)}`);
  }
}

function callbackAttempt(a: CallbackAttemptView): string {
  const status = a.status !== undefined ? ` HTTP ${a.status}` : '';
  const detail = a.detail ? ` (${a.detail})` : '';
  const retries = a.activityAttempts > 1 ? ` [${a.activityAttempts} activity attempts]` : '';
  const redelivered = a.trigger === 'redeliver' ? ' [redelivery]' : '';
  const next = a.nextAttemptAt ? `; next attempt ${a.nextAttemptAt} (in ${a.nextWaitSeconds} s)` : '';
  return `#${a.attempt} ${a.at} ${a.result}${status}${detail}${retries}${redelivered}${next}`;
}

function renderAlerts(x: RunExplanation, line: Line): void {
  line(`operator alerts (${x.operatorAlerts.length})`);
  for (const a of x.operatorAlerts) {
    line(
      `- ${a.episodeKey}${a.kind ? ` [${a.kind}${a.severity ? `/${a.severity}` : ''}]` : ''}: claim ${claim(a.claim)}`,
    );
    if (a.summary) line(`    ${a.summary}`);
    for (const s of a.sends) line(`    ${alertSend(s)}`);
  }
}

function alertSend(s: AlertSendView): string {
  const retries = s.activityAttempts > 1 ? ` after ${s.activityAttempts} attempts` : '';
  return `sent ${s.at}: ${s.result}${retries}${s.failure ? ` (${s.failure})` : ''}`;
}

function renderWorkflows(x: RunExplanation, line: Line): void {
  line(`workflows (${x.workflows.length}${x.truncated.workflows ? ', more not shown' : ''})`);
  const actions = x.workflows.reduce((sum, w) => sum + w.temporalActions.total, 0);
  if (x.workflows.length)
    line(`  ${actions} Temporal Cloud actions in their histories (heartbeats not counted)`);
  for (const w of x.workflows) {
    line(`- ${w.workflowId} (${w.type}) ${w.status}, ${w.startTime} → ${w.closeTime ?? 'open'}`);
    line(`    ${w.uiUrl}`);
    const retried = w.activities.filter((a) => a.attempts > 1 || a.outcome !== 'completed');
    const summary = `${w.activities.length} activities, ${w.localActivities} local, ${w.historyEvents} events${w.historyTruncated ? ' (history cut short)' : ''}, ${w.temporalActions.total} actions`;
    line(`    ${summary}`);
    for (const a of retried) {
      line(`    ${a.type} ${a.outcome} after ${a.attempts} attempt(s)${a.failure ? `: ${a.failure}` : ''}`);
    }
    for (const f of w.workflowTaskFailures) line(`    workflow task failed: ${f}`);
    if (w.failure) line(`    failed: ${w.failure}`);
  }
}

/** What the device reported, or that it reported nothing (then shown and clicked are unknown, not "no"). */
function seenOnDevice(d: DeviceReceiptView): string {
  const answered = d.answeredAt ? `; answered ${d.answeredAt}` : '';
  if (d.receipt === 'none') return `no receipt${answered}`;
  const seen = [
    `shown ${d.shownAt ?? '-'}`,
    `clicked ${d.clickedAt ?? '-'}`,
    ...(d.action ? [`action ${d.action} ${d.actedAt}`] : []),
  ];
  return `${seen.join(', ')}${answered}`;
}
