// What the drill, the fuzzer and the benchmarks share: the servers they run on, the loopback stand-ins for the
// outside parties (a Web Push service, a webhook receiver), the worker as a child process it can kill, and the
// scenario runner of the drill and bench:episodes.
// Benchmarks import test support from here only; nothing under test/ imports from bench/.
export { CallbackReceiver } from './callbackReceiver';
export { startFamilyStack, type FamilyStack } from './familyStack';
export { deleteSweepSchedule } from './processStack';
export { startPushService, type PushService, type SubscriptionJSON } from './pushService';
export { runScenario, type Step } from './scenario';
export { startServers, type ServerStack, type StackWants } from './servers';
export { sweepActivitiesOn } from './sweep';
export { processCpuMs, startProcess, terminate } from './processes';
export { childProcessEnv, WorkerProcess } from './workerProcess';
