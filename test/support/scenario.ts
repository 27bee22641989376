// A scenario (the fault drill, a benchmark): named steps run in order on one context object, each filling in what
// later steps use, and a tear-down that runs whatever happened.
export type Step<C> = (context: C) => Promise<void> | void;

export async function runScenario<C>(
  context: C,
  steps: Step<C>[],
  tearDown: (context: C) => Promise<void>,
): Promise<void> {
  try {
    for (const step of steps) await step(context);
  } finally {
    await tearDown(context);
  }
}
