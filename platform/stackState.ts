// Where `npm start` runs the embedded servers, recorded under .data/ while it runs, so a command started beside
// it (flow-notify explain, emit) finds them without MONGO_URL / TEMPORAL_ADDRESS. The record names the launcher's
// pid: a record left by a launcher that died is ignored.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from './embedded';

// A build's CLI (dist/cli.js) runs from dist/: the checkout, and npm start's .data/, are one folder further up.
const CHECKOUT = existsSync(path.join(PROJECT_ROOT, 'package.json'))
  ? PROJECT_ROOT
  : path.dirname(PROJECT_ROOT);

export const DEFAULT_STACK_STATE_FILE = path.join(CHECKOUT, '.data', 'stack.json');

export interface EmbeddedStackState {
  /** The launcher (npm start) that started the servers and stops them. */
  pid: number;
  /** Only the servers it started: one the environment named is not its to record. */
  mongoUrl?: string;
  temporalAddress?: string;
  temporalUiUrl?: string;
}

export function writeStackState(state: EmbeddedStackState, file = DEFAULT_STACK_STATE_FILE): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(state, null, 2)}\n`);
}

/** Removes the record if it is this launcher's (another one may have taken the file over since). */
export function removeStackState(pid: number, file = DEFAULT_STACK_STATE_FILE): void {
  if (readStackState(file)?.pid === pid) rmSync(file, { force: true });
}

function readStackState(file: string): EmbeddedStackState | undefined {
  try {
    const state = JSON.parse(readFileSync(file, 'utf8')) as EmbeddedStackState;
    return Number.isInteger(state.pid) && state.pid > 0 ? state : undefined;
  } catch {
    return undefined; // absent or unreadable: no stack recorded
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, under another user
  }
}

/** The recorded embedded stack, if its launcher still runs. */
export function findRunningStack(file = DEFAULT_STACK_STATE_FILE): EmbeddedStackState | undefined {
  const state = readStackState(file);
  return state && isAlive(state.pid) ? state : undefined;
}

/** The variables the environment leaves unset, filled from the running stack; what the environment sets wins. */
export function stackEnv(
  state: EmbeddedStackState,
  set: { mongoUrl?: string; temporalAddress?: string; temporalUiUrl?: string },
): Record<string, string> {
  const vars: Record<string, string> = {};
  if (!set.mongoUrl && state.mongoUrl) vars.MONGO_URL = state.mongoUrl;
  if (!set.temporalAddress && state.temporalAddress) vars.TEMPORAL_ADDRESS = state.temporalAddress;
  // The UI link follows the Temporal server it belongs to.
  if (!set.temporalAddress && !set.temporalUiUrl && state.temporalUiUrl)
    vars.TEMPORAL_UI_URL = state.temporalUiUrl;
  return vars;
}
