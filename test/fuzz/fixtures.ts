// The fuzzer's fixtures: the runs, interactions and push devices a case's symbolic params stand for, made through
// the API (and, for a settled callback, the claim store a worker would have written) and reused between cases.
import type { Db } from 'mongodb';
import { mintToken } from '../../api/auth';
import { claimKeys } from '../../domain/outcome';
import { createClaimStore } from '../../store/claims';
import type { SubscriptionJSON } from '../support';
import { send } from './check';
import type { Answer, RouteFixtures, RouteSpec, RunState } from './spec';

export interface RunFixture {
  runId: string;
  teamId: string;
  interactionId?: string;
}

const RUN_BATCH = 2;
export const INTRUDER = 'intruder';
const TEAMMATE = 'fuzz-teammate';

export class Fixtures implements RouteFixtures {
  /** The caller's runs by state and kind (see `kind`). */
  private readonly runs = new Map<string, RunFixture>();
  private other?: RunFixture;
  private readonly endpoints = new Map<string, string[]>();
  /** Devices of a teammate and of another team's user, subscribed when a case first names them. */
  private readonly foreign = new Map<'teammate' | 'otherTeam', string>();
  /** The fuzz-team member the current route's valid tokens name (each route has its own). */
  user = 'fuzz-user';
  /** What the current route's runs are made with (RouteSpec.runs). */
  private kind: RouteSpec['runs'];

  constructor(
    private readonly baseUrl: string,
    readonly tokens: { owner: string; intruder: string; secret: string },
    readonly subscription: (n: number) => SubscriptionJSON,
    private readonly timeoutMs: number,
    private readonly db: Db,
    /** The loopback receiver that runs made with a callback call back (and nothing else). */
    private readonly callbackUrl: string | undefined,
  ) {}

  /** Valid tokens now name this member of fuzz-team (runs are the team's, so fixtures carry over). */
  async actAs(user: string, runs?: RouteSpec['runs']): Promise<void> {
    this.user = user;
    this.tokens.owner = await mintToken(this.tokens.secret, user, 'fuzz-team', '1d');
    this.kind = runs;
  }

  private key(state: RunState): string {
    return `${state}${this.kind?.callback ? '+callback' : ''}${this.kind?.settled ? '+settled' : ''}`;
  }

  /** One of the current member's devices, subscribing one when none is left. */
  async ownDevice(): Promise<{ owner: string; endpoint: string }> {
    if (!this.subscribed.length) await this.subscribe(1);
    return { owner: this.user, endpoint: this.subscribed[0] };
  }

  /** A device of a fuzz-team teammate, or of another team's user (the intruder). */
  async foreignDevice(whose: 'teammate' | 'otherTeam'): Promise<{ owner: string; endpoint: string }> {
    const owner = whose === 'otherTeam' ? INTRUDER : TEAMMATE;
    let endpoint = this.foreign.get(whose);
    if (!endpoint) {
      const token =
        whose === 'otherTeam'
          ? this.tokens.intruder
          : await mintToken(this.tokens.secret, owner, 'fuzz-team', '1d');
      const sub = this.subscription(0);
      await this.setup(token, 'POST', '/api/v1/notifications/push/subscriptions', sub);
      endpoint = sub.endpoint;
      this.foreign.set(whose, endpoint);
    }
    return { owner, endpoint };
  }

  /** A 2xx deleted this device (its owner asked): later cases name another. */
  unsubscribed(endpoint: string): void {
    const list = this.subscribed;
    if (list.includes(endpoint)) list.splice(list.indexOf(endpoint), 1);
    for (const [whose, e] of this.foreign) if (e === endpoint) this.foreign.delete(whose);
  }

  /** The endpoints the current member subscribed (by a valid case or by a route's set-up). */
  get subscribed(): string[] {
    const list = this.endpoints.get(this.user) ?? [];
    this.endpoints.set(this.user, list);
    return list;
  }

  /** Subscribes `count` fresh endpoints for the current member. */
  async subscribe(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const sub = this.subscription(i);
      await this.setup(this.tokens.owner, 'POST', '/api/v1/notifications/push/subscriptions', sub);
      this.subscribed.push(sub.endpoint);
    }
  }

  /** Spare runs per state, prepared a batch at a time (in parallel: most of a run's set-up is Temporal latency). */
  private readonly stock = new Map<string, RunFixture[]>();

  async run(state: RunState): Promise<RunFixture> {
    const key = this.key(state);
    let run = this.runs.get(key);
    if (!run) {
      let spare = this.stock.get(key) ?? [];
      if (!spare.length) {
        spare = await Promise.all(
          Array.from({ length: RUN_BATCH }, () => this.prepare(this.tokens.owner, 'fuzz-team', state)),
        );
      }
      run = spare.shift() as RunFixture;
      this.stock.set(key, spare);
      this.runs.set(key, run);
    }
    return run;
  }

  async otherTeamRun(): Promise<RunFixture> {
    this.other ??= await this.prepare(this.tokens.intruder, 'other-team', 'paused_input');
    return this.other;
  }

  /** A 2xx moved this run: the next case that wants a run in that state gets a fresh one. */
  forget(runId: string): RunFixture | undefined {
    let found: RunFixture | undefined;
    for (const [state, run] of this.runs) {
      if (run.runId !== runId) continue;
      this.runs.delete(state);
      found = run;
    }
    if (this.other?.runId === runId) this.other = undefined;
    return found;
  }

  /** A 2xx moved the caller's run to `state`: it serves as that state's next run (no set-up needed). */
  moved(runId: string, state: RunState, interactionId?: string): void {
    const run = this.forget(runId);
    if (!run) return;
    const key = this.key(state);
    this.stock.set(key, [
      { ...run, interactionId: interactionId ?? run.interactionId },
      ...(this.stock.get(key) ?? []),
    ]);
  }

  /** Requests sent for set-up so far: a case that sent none can reuse the previous case's write counters. */
  setupRequests = 0;

  private async setup(token: string, method: string, path: string, body: unknown): Promise<Answer> {
    this.setupRequests++;
    const answer = await send(this.baseUrl, this.timeoutMs, {
      method,
      path,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if ('error' in answer || answer.status >= 300) {
      const what = 'error' in answer ? answer.error : `${answer.status} ${answer.text.slice(0, 300)}`;
      throw new Error(`the API failed a set-up request (${method} ${path}): ${what}`);
    }
    return answer;
  }

  private async prepare(token: string, teamId: string, state: RunState): Promise<RunFixture> {
    const callback = this.kind?.callback && this.callbackUrl ? { url: this.callbackUrl } : undefined;
    const created = await this.setup(token, 'POST', '/api/v1/runs', { title: `fuzz ${state}`, callback });
    const runId = (JSON.parse(created.text) as { id: string }).id;
    const at = (op: string) => `/api/v1/runs/${runId}/${op}`;
    const run: RunFixture = { runId, teamId };
    if (state === 'paused_input' || state === 'answered') {
      const paused = await this.setup(token, 'POST', at('pause'), { prompt: 'Proceed?' });
      run.interactionId = (JSON.parse(paused.text) as { interactionId: string }).interactionId;
      if (state === 'answered')
        await this.setup(token, 'POST', at(`interactions/${run.interactionId}/answer`), { answer: 'yes' });
    }
    const then: Partial<Record<RunState, [string, unknown]>> = {
      paused_park: ['park', { wall: 'daily_tokens' }],
      paused_operator: ['soft-pause', {}],
      finished: ['complete', { finalAnswer: 'done' }],
      failed: ['fail', { error: { code: 'e', message: 'm' } }],
      cancelled: ['cancel', {}],
    };
    const step = then[state];
    if (step) await this.setup(token, 'POST', at(step[0]), step[1]);
    if (this.kind?.settled && callback && ['finished', 'failed', 'cancelled'].includes(state)) {
      // What a worker leaves when the ended run's callback gave up (no worker runs here): its claim, settled.
      this.setupRequests++;
      const claims = createClaimStore(this.db, { graceSeconds: 60 });
      const key = claimKeys.callback(`${runId}:end`);
      if (
        !(await claims.tryMark(key, 'fuzz-fixture')) ||
        !(await claims.markDelivered(key, 'fuzz-fixture', 'gave_up'))
      )
        throw new Error(`could not settle the callback claim ${key}`);
    }
    return run;
  }
}
