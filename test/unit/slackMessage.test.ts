import assert from 'node:assert/strict';
import type { KnownBlock } from '@slack/types';
import {
  renderSlackMessage,
  slackFactsOf,
  SLACK_LIMITS,
  type SlackEventFacts,
} from '../../domain/slackMessage';
import { teamEventBody } from '../../domain/teamEvents';
import { random } from '../support/seeded';
import { slackShapeProblems } from '../support/slackShape';

// Slack's own types: a block our renderer builds that Slack's SDK would not accept fails the type-check.
const asSlackBlocks = (blocks: ReturnType<typeof renderSlackMessage>['blocks']): KnownBlock[] => blocks;

const facts = (extra: Partial<SlackEventFacts> = {}): SlackEventFacts => ({
  type: 'run.input_requested',
  runId: 'run-1',
  runTitle: 'Nightly import',
  status: 'paused',
  runUrl: 'https://studio.example/runs/run-1',
  ...extra,
});

describe('a team event as a Slack message', () => {
  it('says what happened to which run, with the prompt and a button to the run', () => {
    const message = renderSlackMessage(facts({ detail: 'Ship the fix?' }));
    assert.deepEqual(slackShapeProblems(message), []);
    assert.equal(message.text, 'Needs your input: Nightly import (paused)');
    assert.deepEqual(message.blocks[0], {
      type: 'header',
      text: { type: 'plain_text', text: 'Needs your input: Nightly import' },
    });
    assert.deepEqual(message.blocks[2], { type: 'section', text: { type: 'mrkdwn', text: 'Ship the fix?' } });
    assert.deepEqual(asSlackBlocks(message.blocks).at(-1), {
      type: 'actions',
      elements: [
        {
          type: 'button',
          text: { type: 'plain_text', text: 'Open the run' },
          url: 'https://studio.example/runs/run-1',
        },
      ],
    });
  });

  it("escapes a run's own text so it never links or pings a channel", () => {
    const message = renderSlackMessage(
      facts({ runTitle: '<!channel> & <https://evil|x>', detail: '<@U123> hi' }),
    );
    const mrkdwn = JSON.stringify([message.text, ...message.blocks.slice(1)]);
    assert.doesNotMatch(mrkdwn, /<[!@h]/);
    assert.match(mrkdwn, /&lt;!channel&gt; &amp; &lt;https:\/\/evil\|x&gt;/);
    // plain_text is shown as written: no escapes to read in the header
    assert.equal(
      message.blocks[0].type === 'header' && message.blocks[0].text.text.includes('<!channel> &'),
      true,
    );
  });

  it('stays inside every bound Slack documents, whatever the lengths and characters (seeded)', () => {
    const alphabet = ['a', ' ', '&', '<', '>', '*', '\n', 'é', '😀', '𝔘', '"'];
    for (let seed = 1; seed <= 300; seed++) {
      const next = random(seed);
      const text = (max: number) =>
        Array.from(
          { length: Math.floor(next() * max) },
          () => alphabet[Math.floor(next() * alphabet.length)],
        ).join('');
      const message = renderSlackMessage(
        facts({
          runTitle: text(400),
          detail: next() < 0.8 ? text(8000) : undefined,
          status: text(20) || 'paused',
          type: next() < 0.9 ? 'run.failed' : text(30),
          runUrl: `https://studio.example/runs/${'r'.repeat(Math.floor(next() * 3100))}`,
        }),
      );
      assert.deepEqual(slackShapeProblems(message), [], `seed ${seed}`);
      for (const piece of JSON.stringify(message).match(/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/g) ?? []) {
        assert.fail(`seed ${seed}: a lone high surrogate ${piece}`);
      }
      assert.ok(message.text.length <= SLACK_LIMITS.fallbackText, `seed ${seed}`);
    }
  });

  it('cuts with an ellipsis and never leaves half an escape', () => {
    const message = renderSlackMessage(facts({ detail: `${'x'.repeat(2997)}&&&&` }));
    const section = message.blocks[2];
    assert.ok(section.type === 'section' && section.text);
    assert.equal(section.text.text.length, 2998);
    assert.match(section.text.text, /^x{2997}…$/);
  });

  it('drops the button when the run link is longer than Slack takes, and keeps the message', () => {
    const message = renderSlackMessage(facts({ runUrl: `https://studio.example/runs/${'r'.repeat(3000)}` }));
    assert.equal(
      message.blocks.some((block) => block.type === 'actions'),
      false,
    );
    assert.deepEqual(slackShapeProblems(message), []);
  });

  it('takes the run from the event, the prompt as its detail, or else who answered', () => {
    const run = { id: 'run-1', status: 'paused' as const, title: 'Nightly import' };
    const event = (type: 'run.input_requested' | 'interaction.answered', data: Record<string, unknown>) =>
      teamEventBody({ id: 'ev:1', type, teamId: 'acme', data }, run, 1);
    const url = 'https://studio.example/runs/run-1';
    assert.deepEqual(slackFactsOf(event('run.input_requested', { interactionId: 'i1' }), url, 'Ship?'), {
      ...facts({ detail: 'Ship?' }),
    });
    assert.equal(
      slackFactsOf(event('interaction.answered', { interactionId: 'i1', answeredBy: 'bob' }), url).detail,
      'Answered by bob',
    );
    assert.equal(slackFactsOf(event('run.input_requested', { interactionId: 'i1' }), url).detail, undefined);
  });
});
