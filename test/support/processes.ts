// Service processes for tests that need a real process (a build's dist/, a SIGTERM): start one and wait for its
// ready line, stop one and get its exit code.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Spawns `node <args>` in `cwd` and resolves once a line of its output contains `readyLine`. */
export async function startProcess(
  cwd: string,
  args: string[],
  env: Record<string, string>,
  readyLine: string,
  timeoutMs = 60_000,
): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready in ${timeoutMs} ms:\n${output}`)), timeoutMs);
    const onData = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-8000);
      if (output.includes(readyLine)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`exited before ready (${signal ?? code}):\n${output}`));
    });
  });
  return { child, output: () => output };
}

/** SIGTERM, and the exit code (null when it had to be killed after `timeoutMs`). */
export async function terminate(child: ChildProcess, timeoutMs = 15_000): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  child.kill('SIGTERM');
  const code = await exited;
  clearTimeout(timer);
  return code;
}

/** CPU time (user + system, ms) a process has used so far, from /proc; undefined off Linux or once it exited. */
export function processCpuMs(pid: number): number | undefined {
  try {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    const ticksPerSecond = 100; // USER_HZ, 100 on every Linux we run on
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
  } catch {
    return undefined;
  }
}
