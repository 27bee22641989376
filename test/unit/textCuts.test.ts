// Every place that cuts text people or callers wrote cuts between code points: half an emoji is not text.
import assert from 'node:assert/strict';
import { deviceLabel } from '../../domain/deviceLabel';
import { renderAnswered, renderPush } from '../../domain/push';
import { pauseEntries } from '../../domain/timeline';
import type { RunOutcome } from '../../domain/outcome';

const wellFormed = (text: string) =>
  !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);

describe('text cut to a bound', () => {
  // With and without one ASCII letter first, so that any bound falls between an emoji's two halves in one of them.
  const texts = (n: number) => ['😀'.repeat(n), `x${'😀'.repeat(n)}`];

  it("a push's title and body", () => {
    for (const text of texts(300)) {
      const outcome = {
        runId: 'run_1',
        episodeId: 'run_1:finished',
        kind: 'run_finished',
        title: text,
        finalAnswer: text,
      } as unknown as RunOutcome;
      const push = renderPush(outcome, 'run_finished', 'https://studio.example');
      assert.ok(wellFormed(push.title), push.title);
      assert.ok(wellFormed(push.body), push.body);
      assert.ok(push.body.endsWith('…'));
      const answered = renderAnswered({
        ...{ runId: 'run_1', episodeId: 'run_1:input:i1', studioUrl: 'https://studio.example' },
        ...{ runTitle: text, answeredBy: text, choiceLabel: text },
      });
      assert.ok(wellFormed(answered.title) && wellFormed(answered.body), answered.body);
    }
  });

  it("a device's label from its User-Agent", () => {
    for (const text of texts(200)) {
      const label = deviceLabel(text);
      assert.ok(wellFormed(label), label);
      assert.ok(label.endsWith('…'));
    }
  });

  it("a timeline's prompt and answer", () => {
    for (const text of texts(300)) {
      const entries = pauseEntries([
        {
          _id: 'i1',
          prompt: text,
          createdAt: new Date(0),
          status: 'answered',
          answer: text,
          answeredAt: new Date(1),
        },
      ]);
      for (const entry of entries) assert.ok(wellFormed(entry.detail ?? ''), entry.detail);
    }
  });
});
