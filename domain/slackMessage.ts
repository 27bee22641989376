// A team event as a Slack incoming-webhook message (Block Kit): a header, the run's title and status, the prompt of
// an input request, and a button to the run. Pure, so the shape is checked without a server; Slack refuses a
// message whose text is over its documented bounds, so every text is cut to them here.
import type { TeamEventBody } from './teamEvents';

/** What a Slack message says about one event; the endpoint's sender maps its event onto it. */
export interface SlackEventFacts {
  type: string;
  runId: string;
  runTitle: string;
  status: string;
  runUrl: string;
  /** The question of an input request, or who answered an interaction. */
  detail?: string;
}

/** Slack's documented bounds for the parts used here. */
export const SLACK_LIMITS = {
  headerText: 150,
  sectionText: 3000,
  fieldText: 2000,
  buttonText: 75,
  buttonUrl: 3000,
  fallbackText: 3000,
} as const;

const HEADLINES: Record<string, string> = {
  'run.input_requested': 'Needs your input',
  'run.parked': 'Parked: over its usage',
  'run.finished': 'Finished',
  'run.failed': 'Failed',
  'run.cancelled': 'Cancelled',
  'run.stalled': 'Stalled',
  'run.recovered': 'Progressing again',
  'run.budget_warning': 'Near its budget',
  'run.budget_exceeded': 'Over its budget',
  'interaction.answered': 'Answered',
  'interaction.escalated': 'Still waiting for an answer',
  'endpoint.test': 'Test event',
};

/**
 * What a Slack message says about a team event: the run as the event shows it, and as its detail the input
 * request's prompt (given by the sender, which reads it) or who answered.
 */
export function slackFactsOf(body: TeamEventBody, runUrl: string, prompt?: string): SlackEventFacts {
  const answeredBy =
    typeof body.data.answeredBy === 'string' ? `Answered by ${body.data.answeredBy}` : undefined;
  return {
    type: body.type,
    runId: body.run?.id ?? '',
    runTitle: body.run?.title ?? '',
    status: body.run?.status ?? '',
    runUrl,
    detail: prompt ?? answeredBy,
  };
}

export interface SlackMessage {
  text: string;
  blocks: SlackBlock[];
}

type PlainText = { type: 'plain_text'; text: string };
type Mrkdwn = { type: 'mrkdwn'; text: string };
export type SlackBlock =
  | { type: 'header'; text: PlainText }
  | { type: 'section'; text?: Mrkdwn; fields?: Mrkdwn[] }
  | { type: 'actions'; elements: { type: 'button'; text: PlainText; url: string }[] };

export function renderSlackMessage(facts: SlackEventFacts): SlackMessage {
  const headline = HEADLINES[facts.type] ?? facts.type;
  const title = facts.runTitle.trim() || facts.runId;
  const blocks: SlackBlock[] = [
    { type: 'header', text: plain(`${headline}: ${title}`, SLACK_LIMITS.headerText) },
    {
      type: 'section',
      fields: [
        mrkdwn(`*Run*\n${escapeMrkdwn(title)}`, SLACK_LIMITS.fieldText),
        mrkdwn(`*Status*\n${escapeMrkdwn(facts.status)}`, SLACK_LIMITS.fieldText),
      ],
    },
  ];
  if (facts.detail?.trim()) {
    blocks.push({ type: 'section', text: mrkdwn(escapeMrkdwn(facts.detail), SLACK_LIMITS.sectionText) });
  }
  if (facts.runUrl.length <= SLACK_LIMITS.buttonUrl) {
    blocks.push({
      type: 'actions',
      elements: [{ type: 'button', text: plain('Open the run', SLACK_LIMITS.buttonText), url: facts.runUrl }],
    });
  }
  // Slack notifies with the fallback text, read as mrkdwn: escaped as the sections are.
  const text = `${headline}: ${escapeMrkdwn(title)} (${escapeMrkdwn(facts.status)})`;
  return { text: cut(text, SLACK_LIMITS.fallbackText), blocks };
}

/** Slack reads `&`, `<` and `>` in mrkdwn as markup (links, mentions): a run's own text must not ping a channel. */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function plain(text: string, max: number): PlainText {
  return { type: 'plain_text', text: cut(text, max) };
}

function mrkdwn(text: string, max: number): Mrkdwn {
  return { type: 'mrkdwn', text: cut(text, max) };
}

/** Cuts to `max` UTF-16 units (stricter than characters; a surrogate pair is never split), ending with an ellipsis. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  let kept = '';
  for (const char of text) {
    if (kept.length + char.length > max - 1) break;
    kept += char;
  }
  // An escape cut in half (`&am…`) would show as text: drop the partial entity too.
  return `${kept.replace(/&[a-z]{0,3}$/, '')}…`;
}
