// The README's callback receiver, run as written: it must take what the service signs (one secret, and two
// during a rotation's overlap), refuse a tampered body, and handle a repeated webhook-id once.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../../platform/freePort';
import { signWebhook } from '../../delivery/callback/signature';

const ROOT = path.join(__dirname, '..', '..');
const SECRET = `whsec_${Buffer.from('the-secret-the-receiver-holds!!!').toString('base64')}`;
const NEXT_SECRET = `whsec_${Buffer.from('the-secret-after-the-rotation!!!').toString('base64')}`;

function readmeReceiver(): string {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Receive callbacks'));
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(code, "the README's receiver (a js block under 'Receive callbacks')");
  return code;
}

describe("the README's callback receiver", function () {
  this.timeout(20_000);
  let child: ChildProcess;
  let url: string;
  const printed: string[] = [];

  before(async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'receiver-')), 'receiver.js');
    writeFileSync(file, readmeReceiver());
    const port = await freePort();
    url = `http://127.0.0.1:${port}/`;
    child = spawn(process.execPath, [file], {
      env: {
        PATH: process.env.PATH,
        NODE_PATH: path.join(ROOT, 'node_modules'),
        FLOW_CALLBACK_SECRET: SECRET,
        PORT: String(port),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child
      .stdout!.setEncoding('utf8')
      .on('data', (chunk: string) => printed.push(...chunk.trim().split('\n')));
    for (let tries = 0; ; tries++) {
      try {
        await fetch(url, { method: 'POST', body: '{}' });
        return;
      } catch (err) {
        if (tries > 100) throw err;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  });

  after(() => child?.kill());

  async function deliver(id: string, body: object, secrets: string[], tamper = false): Promise<number> {
    const raw = JSON.stringify(body);
    const headers = signWebhook(secrets, id, Math.floor(Date.now() / 1000), raw);
    const sent = tamper ? raw.replace('finished', 'failed') : raw;
    const res = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: sent,
    });
    return res.status;
  }

  const event = (runId: string) => ({
    version: '1',
    type: 'run.finished',
    episodeId: `${runId}:end`,
    run: {
      id: runId,
      status: 'finished',
      finalAnswer: 'ok',
      error: null,
      createdAt: '2026-12-02T10:00:00.000Z',
      endedAt: '2026-12-02T10:05:00.000Z',
    },
  });

  it('takes a signed callback once, however often it comes, and refuses a tampered one', async () => {
    assert.equal(await deliver('run_a:end', event('run_a'), [SECRET]), 204);
    assert.equal(await deliver('run_a:end', event('run_a'), [SECRET]), 204, 'a repeat is acknowledged too');
    assert.equal(await deliver('run_b:end', event('run_b'), [SECRET], true), 401);
    assert.equal(await deliver('run_c:end', event('run_c'), [NEXT_SECRET]), 401, 'a secret it does not hold');
    // During a rotation's overlap the service signs with both; the receiver still holds the old one.
    assert.equal(await deliver('run_d:end', event('run_d'), [NEXT_SECRET, SECRET]), 204);
    // What it printed reaches this process through a pipe, a moment after the answers.
    for (let waited = 0; printed.length < 2 && waited < 2000; waited += 20)
      await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(printed, ['run.finished run_a finished', 'run.finished run_d finished']);
  });
});
