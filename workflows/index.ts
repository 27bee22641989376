// The worker's only workflowsPath: every workflow type is exported from here.
export { callbackRedeliverWorkflow } from './redeliver';
export { episodeWorkflow } from './episode';
export { runHealthWorkflow } from './health';
export { operatorAlertWorkflow } from './operatorAlert';
export { sweepWorkflow } from './sweep';
