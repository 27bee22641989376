// The package's main entry: what runners, operators' tools and other services import.
export {
  checkCallbackTarget,
  TargetRefusedError,
  ResolverUnavailableError,
  type CheckedTarget,
  type HostLookup,
} from './delivery/ssrfGuard';
export { signWebhook } from './delivery/callback/signature';
export { buildRunOutcome, runOutcomeEventId, claimKeys, type RunOutcome } from './domain/outcome';
export { createOutcomeEmitter, startEpisode, episodeOptions } from './client/emitter';
export {
  emitFromRunner,
  FINAL_DISPOSITIONS,
  NON_FINAL_DISPOSITIONS,
  type Disposition,
} from './client/runner';
export { notifyOperator } from './client/operator';
export { createHealthSignaler, healthOptions } from './client/health';
export { loadConfig, loadEmitterConfig, ConfigError, type Config } from './config';
export { temporalConnectionOptions } from './client/connection';
export { createApp } from './api/app';
export { startApi } from './api/server';
export { createWorker } from './worker';
