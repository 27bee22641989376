// The worker's only workflowsPath: every workflow type is exported from here.
export { episodeWorkflow } from './episode';
export { sweepWorkflow } from './sweep';
