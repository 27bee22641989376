// The wire form of a push: our payload with the Declarative Web Push form beside it, within its byte budget.
import assert from 'node:assert/strict';
import {
  fitWirePayload,
  PUSH_PAYLOAD_MAX_BYTES,
  STUDIO_URL_MAX_LENGTH,
  withDeclarativeForm,
} from '../../domain/declarativePush';
import { renderDigest, type PushPayload } from '../../domain/push';
import { digestSendId, digestWorkflowId } from '../../contract/workflows';
import { isId } from '../../domain/ids';

const base: PushPayload = {
  v: 1,
  kind: 'human_input_requested',
  title: 'Deploy needs your input',
  body: 'Ship v2?',
  url: 'https://studio.example/runs/run_1',
  tag: 'run_1:input:i_1',
  runId: 'run_1',
  episodeId: 'run_1:input:i_1',
  actions: [{ action: 'approve', title: 'Approve', token: 't'.repeat(43) }],
};

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

describe('declarative web push form', () => {
  it('carries web_push 8030 and the notification the format requires (title, navigate), mutable for our worker', () => {
    const wire = withDeclarativeForm(base);
    assert.equal(wire.web_push, 8030);
    assert.equal(wire.mutable, true);
    assert.deepEqual(wire.notification, {
      title: base.title,
      body: base.body,
      navigate: base.url,
      tag: base.tag,
      require_interaction: true,
      actions: [{ action: 'approve', title: 'Approve', navigate: base.url }],
    });
    // The service worker's fields stay as they were, tokens only in ours.
    assert.deepEqual(
      { ...wire, web_push: undefined, notification: undefined, mutable: undefined },
      {
        ...base,
        web_push: undefined,
        notification: undefined,
        mutable: undefined,
      },
    );
    assert.ok(!JSON.stringify(wire.notification).includes(base.actions![0].token));
  });

  it('an outcome that waits for no one has neither require_interaction nor actions', () => {
    const wire = withDeclarativeForm({ ...base, kind: 'run_finished', actions: undefined });
    assert.deepEqual(Object.keys(wire.notification).sort(), ['body', 'navigate', 'tag', 'title']);
  });

  it('the close of an answered question is silent in the declarative form too; a question is not', () => {
    assert.equal(withDeclarativeForm({ ...base, kind: 'answered' }).notification.silent, true);
    assert.equal(withDeclarativeForm(base).notification.silent, undefined);
  });

  it('a push that must alert again (a rung, a snooze) says renotify in both forms; a first push does not', () => {
    const wire = withDeclarativeForm({ ...base, renotify: true });
    assert.equal(wire.renotify, true);
    assert.equal(wire.notification.renotify, true);
    assert.equal(withDeclarativeForm(base).notification.renotify, undefined);
  });

  it('a payload within the budget is left whole', () => {
    assert.deepEqual(fitWirePayload(base), withDeclarativeForm(base));
  });

  it('over the budget the body gives way first (whole code points, in both forms), then the title', () => {
    const escaped = '\u0001'; // six bytes in JSON: the worst a character costs
    const emoji = '😀'; // a surrogate pair: never cut in half
    const payload = { ...base, title: escaped.repeat(200), body: `${emoji}${escaped}`.repeat(150) };
    const wire = fitWirePayload(payload);
    assert.ok(bytes(wire) <= PUSH_PAYLOAD_MAX_BYTES, `${bytes(wire)} bytes`);
    assert.ok(wire.body.endsWith('…'));
    assert.ok(!/[\ud800-\udbff](?![\udc00-\udfff])/.test(wire.body), 'no lone high surrogate');
    assert.equal(wire.notification.body, wire.body);
    assert.equal(wire.notification.title, wire.title);
    assert.equal(wire.actions![0].token, base.actions![0].token, 'tokens are never cut');

    const tiny = fitWirePayload(payload, 1200);
    assert.ok(bytes(tiny) <= 1200, `${bytes(tiny)} bytes`);
    assert.equal(tiny.body, '…');
    assert.ok(tiny.title.length < payload.title.length);
  });

  it('when body and title are not enough, the declarative actions go; ours (with the tokens) stay', () => {
    const wire = fitWirePayload({ ...base, url: `https://studio.example/${'p'.repeat(600)}` }, 1800);
    assert.equal(wire.notification.actions, undefined);
    assert.deepEqual(wire.actions, base.actions);
  });

  it('a digest fits with the longest team and user ids a token may carry, in any script: its tag and id carry both', () => {
    const studio = `https://${'s'.repeat(STUDIO_URL_MAX_LENGTH - 'https://'.length)}`;
    /** The longest id of this character the API takes from a token. */
    const longest = (char: string) => {
      let id = '';
      while (isId(id + char)) id += char;
      return id;
    };
    // Plain, escaped in JSON (two bytes), three bytes (CJK), four (an emoji). Control characters are refused.
    assert.equal(isId('ac\u0001me'), false);
    for (const char of ['a', '"', '\\', '团', '😀']) {
      const team = longest(char);
      const user = longest(char);
      assert.ok(team.length > 0);
      const workflowId = digestWorkflowId(team, user);
      const wire = fitWirePayload({
        ...renderDigest({
          digestId: digestSendId(workflowId, '01a2507a-3ec5-7061-8f00-6c1b2d3e4f50', 3),
          tag: workflowId,
          counts: { run_finished: 3, run_failed: 2 },
          newest: [{ kind: 'run_finished', title: 'Deploy' }],
          studioUrl: studio,
        }),
        receipt: 'r'.repeat(43),
      });
      assert.ok(
        bytes(wire) <= PUSH_PAYLOAD_MAX_BYTES,
        `ids of ${JSON.stringify(char)}: ${bytes(wire)} bytes`,
      );
    }
  });

  it('with the longest STUDIO_URL and three choices, the largest question still fits with its declarative actions', () => {
    const studio = `https://${'s'.repeat(STUDIO_URL_MAX_LENGTH - 'https://'.length)}`;
    const runId = `run_${'r'.repeat(24)}`;
    const episodeId = `${runId}:input:int_${'i'.repeat(24)}`;
    const escaped = '\u0001'; // six bytes in JSON: the worst a character costs
    const wire = fitWirePayload({
      ...base,
      title: escaped.repeat(200),
      body: escaped.repeat(2000),
      url: `${studio}/runs/${runId}`,
      tag: episodeId,
      runId,
      episodeId,
      actions: [1, 2, 3].map((n) => ({ action: `c${n}`, title: escaped.repeat(40), token: 't'.repeat(43) })),
    });
    assert.ok(bytes(wire) <= PUSH_PAYLOAD_MAX_BYTES, `${bytes(wire)} bytes`);
    assert.equal(wire.notification.actions?.length, 3, 'the declarative actions kept');
    assert.ok(wire.title.length > 0);
  });
});
