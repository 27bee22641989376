// The SSRF guard: the shared corpus, one resolution per check, the pinned dial, no redirects, timeout, body cap.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, LookupFunction } from 'node:net';
import path from 'node:path';
import {
  checkCallbackTarget,
  pinnedAgent,
  postPinned,
  ResolverUnavailableError,
  TargetRefusedError,
  type HostLookup,
  type ResolvedAddress,
} from '../delivery/ssrfGuard';
import { waitUntil } from './support/waitUntil';

const CORPUS = path.resolve(__dirname, '../../shared/ssrf/corpus.tsv');

interface CorpusCase {
  line: number;
  url: string;
  verdict: 'refuse' | 'allow';
  addresses: string[];
}

function readCorpus(): CorpusCase[] {
  const cases: CorpusCase[] = [];
  readFileSync(CORPUS, 'utf8')
    .split('\n')
    .forEach((text, index) => {
      if (text.trim() === '' || text.startsWith('#')) return;
      const [url, verdict, addresses = ''] = text.split('\t').map((s) => s.trim());
      if (verdict !== 'refuse' && verdict !== 'allow') {
        throw new Error(`corpus line ${index + 1}: unknown verdict "${verdict}"`);
      }
      const list = addresses
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      cases.push({ line: index + 1, url, verdict, addresses: list });
    });
  return cases;
}

function notFound(hostname: string): Error {
  return Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname });
}

const familyOf = (address: string): number => (address.includes(':') ? 6 : 4);

/** A fake resolver: answers the given addresses (or ENOTFOUND for none) and counts its calls. */
function fakeLookup(...answers: string[][]): HostLookup & { calls: string[] } {
  const calls: string[] = [];
  const lookup = async (hostname: string): Promise<ResolvedAddress[]> => {
    const answer = answers[Math.min(calls.length, answers.length - 1)] ?? [];
    calls.push(hostname);
    if (answer.length === 0) throw notFound(hostname);
    return answer.map((address) => ({ address, family: familyOf(address) }));
  };
  return Object.assign(lookup, { calls });
}

async function refusal(promise: Promise<unknown>): Promise<TargetRefusedError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof TargetRefusedError, `expected TargetRefusedError, got ${String(err)}`);
    assert.equal(typeof err.reason, 'string');
    assert.ok(err.reason.length > 0, 'a refusal carries a reason');
    return err;
  }
  assert.fail('expected the target to be refused');
}

interface Receiver {
  port: number;
  requests: http.IncomingMessage[];
  close: () => Promise<void>;
}

async function receiver(
  handler: (req: http.IncomingMessage, res: http.ServerResponse) => void,
): Promise<Receiver> {
  const requests: http.IncomingMessage[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req);
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const ok = (_req: http.IncomingMessage, res: http.ServerResponse): void => {
  res.writeHead(204).end();
};

describe('SSRF guard: the shared corpus (strict mode)', () => {
  for (const c of readCorpus()) {
    it(`line ${c.line}: ${c.verdict}s ${c.url}${c.addresses.length ? ` (${c.addresses.join(',')})` : ''}`, async () => {
      const lookup = fakeLookup(c.addresses);
      const check = checkCallbackTarget(c.url, { lookup });
      if (c.verdict === 'refuse') {
        await refusal(check);
      } else {
        const target = await check;
        assert.equal(target.url.href, new URL(c.url).href);
        assert.ok(target.family === 4 || target.family === 6);
      }
      assert.ok(lookup.calls.length <= 1, 'at most one resolution');
    });
  }
});

describe('SSRF guard: checkCallbackTarget', () => {
  it('refuses a name answering a public then a private address', async () => {
    const err = await refusal(
      checkCallbackTarget('https://split.example/hook', {
        lookup: fakeLookup(['93.184.216.34', '10.0.0.7']),
      }),
    );
    assert.match(err.reason, /10\.0\.0\.7/);
  });

  it('refuses a private address behind a public one under IPv6 too', async () => {
    await refusal(
      checkCallbackTarget('https://split6.example/hook', {
        lookup: fakeLookup(['2606:2800:220:1:248:1893:25c8:1946', 'fd00::1']),
      }),
    );
  });

  it('resolves the host exactly once per check and pins the first answer', async () => {
    const lookup = fakeLookup(['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946']);
    const target = await checkCallbackTarget('https://once.example:8443/hook?x=1', { lookup });
    assert.deepEqual(lookup.calls, ['once.example']);
    assert.equal(target.address, '93.184.216.34');
    assert.equal(target.family, 4);
  });

  it('classifies IP literals without calling the resolver', async () => {
    for (const url of [
      'http://2130706433/',
      'http://0x7f000001/',
      'http://[::ffff:127.0.0.1]/',
      'http://127.1/',
    ]) {
      const lookup = fakeLookup(['93.184.216.34']);
      await refusal(checkCallbackTarget(url, { lookup }));
      assert.equal(lookup.calls.length, 0, url);
    }
    const lookup = fakeLookup(['10.0.0.1']);
    const target = await checkCallbackTarget('http://[2606:2800:220:1:248:1893:25c8:1946]:8080/', { lookup });
    assert.equal(target.address, '2606:2800:220:1:248:1893:25c8:1946');
    assert.equal(target.family, 6);
    assert.equal(lookup.calls.length, 0);
  });

  it('fails closed when the resolver errors or answers nothing', async () => {
    const empty: HostLookup = async () => [];
    assert.match(
      (await refusal(checkCallbackTarget('http://x.example/', { lookup: empty }))).reason,
      /resolve/,
    );
    // A resolver that cannot answer is not a verdict: the check still fails (nothing is sent), but as retryable.
    const broken: HostLookup = async () => {
      throw Object.assign(new Error('queryA ESERVFAIL x.example'), { code: 'ESERVFAIL' });
    };
    await assert.rejects(
      checkCallbackTarget('http://x.example/', { lookup: broken }),
      ResolverUnavailableError,
    );
  });

  it('names the reason for scheme, credentials and reserved addresses', async () => {
    const lookup = fakeLookup(['93.184.216.34']);
    assert.match((await refusal(checkCallbackTarget('ftp://x.example/', { lookup }))).reason, /scheme/);
    assert.match(
      (await refusal(checkCallbackTarget('https://u:p@x.example/', { lookup }))).reason,
      /credentials/,
    );
    assert.match((await refusal(checkCallbackTarget('not a url', { lookup }))).reason, /URL/);
    assert.match(
      (await refusal(checkCallbackTarget('http://x.example/', { lookup: fakeLookup(['127.0.0.1']) }))).reason,
      /private or reserved address \(127\.0\.0\.1\)/,
    );
  });

  it('refuses every range that is not public unicast', async () => {
    const notPublic = [
      '0.1.2.3',
      '10.1.1.1',
      '100.127.255.254',
      '127.8.8.8',
      '169.254.1.1',
      '172.31.255.255',
      '192.0.0.9',
      '192.0.2.1',
      '192.88.99.1',
      '192.168.255.1',
      '198.19.0.1',
      '198.51.100.7',
      '203.0.113.9',
      '239.255.255.250',
      '240.0.0.1',
      '255.255.255.255',
      '::',
      '::1',
      '::ffff:8.8.8.8',
      '::8.8.8.8',
      '64:ff9b::808:808',
      '64:ff9b:1::1',
      '2002:808:808::1',
      '2001:0:4136:e378::1',
      '2001:db8::1',
      '2001:2::1',
      '100::1',
      'fd12:3456::1',
      'fe80::1',
      'fec0::1',
      'ff02::1',
      '4000::1',
    ];
    for (const address of notPublic) {
      await refusal(checkCallbackTarget('https://r.example/', { lookup: fakeLookup([address]) }));
    }
    for (const address of ['8.8.8.8', '1.1.1.1', '100.128.0.1', '172.32.0.1', '2001:4860:4860::8888']) {
      const target = await checkCallbackTarget('https://r.example/', { lookup: fakeLookup([address]) });
      assert.equal(target.address, address);
    }
  });

  it('with allowPrivate lets loopback and private through but still refuses unspecified and multicast', async () => {
    for (const address of ['127.0.0.1', '::1', '10.0.0.5', '192.168.1.1', 'fd00::1']) {
      const target = await checkCallbackTarget('http://p.example/', {
        allowPrivate: true,
        lookup: fakeLookup([address]),
      });
      assert.equal(target.address, address);
    }
    const both = await checkCallbackTarget('http://localhost/', {
      allowPrivate: true,
      lookup: fakeLookup(['127.0.0.1', '::1']),
    });
    assert.equal(both.address, '127.0.0.1');
    for (const address of ['0.0.0.0', '::', '224.0.0.1', 'ff02::1', '255.255.255.255']) {
      await refusal(
        checkCallbackTarget('http://p.example/', { allowPrivate: true, lookup: fakeLookup([address]) }),
      );
    }
    await refusal(checkCallbackTarget('file:///etc/passwd', { allowPrivate: true }));
    await refusal(checkCallbackTarget('http://a:b@127.0.0.1/', { allowPrivate: true }));
    await refusal(
      checkCallbackTarget('http://nowhere.invalid/', { allowPrivate: true, lookup: fakeLookup([]) }),
    );
  });
});

describe('SSRF guard: cloud metadata addresses', () => {
  // Azure WireServer, Alibaba Cloud, Oracle Cloud, AWS IMDS over IPv6 (the whole fd00:ec2::/64), GCP over IPv6,
  // and the link-local 169.254.169.254 that most clouds use.
  const metadata = [
    '168.63.129.16',
    '100.100.100.200',
    '192.0.0.192',
    'fd00:ec2::254',
    'fd00:ec2::23',
    'fd20:ce::254',
    '169.254.169.254',
  ];
  for (const address of metadata) {
    it(`never allows ${address}, not even with allowPrivate, as a name's answer or a literal`, async () => {
      for (const allowPrivate of [false, true]) {
        const viaName = await refusal(
          checkCallbackTarget('http://meta.example/', { allowPrivate, lookup: fakeLookup([address]) }),
        );
        assert.equal(viaName.category, 'refused: private address');
        const host = address.includes(':') ? `[${address}]` : address;
        await refusal(checkCallbackTarget(`http://${host}/latest`, { allowPrivate }));
      }
    });
  }

  it('leaves the neighbours of those addresses as they were', async () => {
    for (const address of ['168.63.129.17', '100.100.100.201', 'fd00:ec3::1']) {
      await checkCallbackTarget('http://n.example/', { allowPrivate: true, lookup: fakeLookup([address]) });
    }
    const pub = await checkCallbackTarget('http://n.example/', { lookup: fakeLookup(['168.63.129.17']) });
    assert.equal(pub.address, '168.63.129.17');
  });
});

describe('SSRF guard: what users are told', () => {
  it('a refusal carries a category without the address; the detail (for operators) names it', async () => {
    const refused = await refusal(
      checkCallbackTarget('http://internal.example/', { lookup: fakeLookup(['10.1.2.3']) }),
    );
    assert.equal(refused.category, 'refused: private address');
    assert.doesNotMatch(refused.category, /10\.1\.2\.3/);
    assert.match(refused.reason, /10\.1\.2\.3/);
    assert.equal(
      (await refusal(checkCallbackTarget('http://gone.example/', { lookup: fakeLookup([]) }))).category,
      'refused: dns',
    );
    assert.equal((await refusal(checkCallbackTarget('ftp://x.example/'))).category, 'refused: invalid url');
  });
});

describe('SSRF guard: postPinned against loopback receivers', () => {
  it('strict mode refuses a loopback receiver; allowPrivate accepts it', async () => {
    const rx = await receiver(ok);
    try {
      const url = `http://127.0.0.1:${rx.port}/hook`;
      await refusal(checkCallbackTarget(url));
      const target = await checkCallbackTarget(url, { allowPrivate: true });
      const res = await postPinned(target, { body: '{}', timeoutMs: 5000 });
      assert.equal(res.status, 204);
      assert.equal(rx.requests.length, 1);
    } finally {
      await rx.close();
    }
  });

  it('connects to the pinned address even though a second resolution would answer differently', async () => {
    const seen: { host?: string; body: string; method?: string; url?: string }[] = [];
    const rx = await receiver((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        seen.push({ host: req.headers.host, body, method: req.method, url: req.url });
        res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
      });
    });
    try {
      const lookup = fakeLookup(['127.0.0.1'], ['10.255.255.1']);
      const target = await checkCallbackTarget(`http://pinned.test:${rx.port}/hook?a=1`, {
        allowPrivate: true,
        lookup,
      });
      assert.equal(target.address, '127.0.0.1');
      const res = await postPinned(target, {
        headers: { 'content-type': 'application/json' },
        body: '{"hello":"world"}',
        timeoutMs: 5000,
      });
      assert.equal(res.status, 200);
      assert.equal(res.body, 'thanks');
      assert.deepEqual(seen, [
        { host: `pinned.test:${rx.port}`, body: '{"hello":"world"}', method: 'POST', url: '/hook?a=1' },
      ]);
      assert.equal(lookup.calls.length, 1, 'the delivery did not resolve the name again');
    } finally {
      await rx.close();
    }
  });

  it('the pinned agent answers both lookup shapes with the validated address', async () => {
    const target = await checkCallbackTarget('https://pinned.test/', {
      allowPrivate: true,
      lookup: fakeLookup(['::1']),
    });
    const agent = pinnedAgent(target);
    try {
      const { lookup } = (agent as unknown as { options: { lookup: LookupFunction } }).options;
      const all = await new Promise<unknown>((resolve, reject) =>
        lookup('elsewhere.test', { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
      );
      assert.deepEqual(all, [{ address: '::1', family: 6 }]);
      const one = await new Promise<unknown[]>((resolve, reject) =>
        lookup('elsewhere.test', {}, (err, address, family) =>
          err ? reject(err) : resolve([address, family]),
        ),
      );
      assert.deepEqual(one, ['::1', 6]);
    } finally {
      agent.destroy();
    }
  });

  it('reaches the pinned address with autoSelectFamily off (single-address lookup)', async () => {
    const rx = await receiver(ok);
    try {
      const target = await checkCallbackTarget(`http://pinned.test:${rx.port}/`, {
        allowPrivate: true,
        lookup: fakeLookup(['127.0.0.1']),
      });
      const res = await postPinned(target, { body: '', timeoutMs: 5000, agent: { autoSelectFamily: false } });
      assert.equal(res.status, 204);
      assert.equal(rx.requests[0].headers.host, `pinned.test:${rx.port}`);
    } finally {
      await rx.close();
    }
  });

  it('does not follow a 307 to another receiver', async () => {
    const other = await receiver(ok);
    const rx = await receiver((_req, res) => {
      res.writeHead(307, { location: `http://127.0.0.1:${other.port}/elsewhere` }).end();
    });
    try {
      const target = await checkCallbackTarget(`http://127.0.0.1:${rx.port}/hook`, { allowPrivate: true });
      const res = await postPinned(target, { body: '{}', timeoutMs: 5000 });
      assert.equal(res.status, 307);
      assert.equal(res.headers.location, `http://127.0.0.1:${other.port}/elsewhere`);
      assert.equal(rx.requests.length, 1);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(other.requests.length, 0, 'the redirect target got nothing');
    } finally {
      await rx.close();
      await other.close();
    }
  });

  it('rejects at its timeout when the receiver never answers, and cuts the connection', async () => {
    let cut = false;
    const rx = await receiver((req) => {
      // Never answers.
      req.socket.once('close', () => (cut = true));
    });
    try {
      const target = await checkCallbackTarget(`http://127.0.0.1:${rx.port}/hook`, { allowPrivate: true });
      const started = Date.now();
      await assert.rejects(
        postPinned(target, { body: '{}', timeoutMs: 300 }),
        (err: NodeJS.ErrnoException) => {
          assert.ok(err.code === 'ETIMEDOUT' || /timeout|timed out/i.test(err.message), String(err));
          return true;
        },
      );
      // Not before its timeout (a timer: a busy machine only makes it later), and the request is not left open.
      assert.ok(Date.now() - started >= 250, `rejected after ${Date.now() - started} ms`);
      assert.equal(rx.requests.length, 1);
      await waitUntil('the receiver to see the connection cut', () => cut);
    } finally {
      await rx.close();
    }
  });

  it('reads at most maxResponseBytes of a 1 MiB answer', async () => {
    const rx = await receiver((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = 'x'.repeat(16 * 1024);
      let sent = 0;
      const pump = (): void => {
        while (sent < 1024 * 1024) {
          sent += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      res.on('error', () => undefined);
      pump();
    });
    try {
      const target = await checkCallbackTarget(`http://127.0.0.1:${rx.port}/hook`, { allowPrivate: true });
      const capped = await postPinned(target, { body: '{}', timeoutMs: 5000, maxResponseBytes: 1000 });
      assert.equal(capped.status, 200);
      assert.ok(Buffer.byteLength(capped.body) <= 1000, `got ${Buffer.byteLength(capped.body)} bytes`);
      assert.equal(capped.body, 'x'.repeat(1000));
      assert.equal(capped.truncated, true);

      const byDefault = await postPinned(target, { body: '{}', timeoutMs: 5000 });
      assert.equal(Buffer.byteLength(byDefault.body), 64 * 1024);
      assert.equal(byDefault.truncated, true);
    } finally {
      await rx.close();
    }
  });
});
