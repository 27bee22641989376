// The worker's only workflowsPath: every workflow type is exported from here.
import type { Workflows } from '../contract/workflows';
import { callbackRedeliverWorkflow } from './redeliver';
import { callbackRecoverWorkflow } from './recover';
import { digestWorkflow } from './digest';
import { digestResendWorkflow } from './digestResend';
import { episodeWorkflow } from './episode';
import { interactionWorkflow } from './interaction';
import { runHealthWorkflow } from './health';
import { operatorAlertWorkflow } from './operatorAlert';
import { sweepWorkflow } from './sweep';
import { teamEventWorkflow } from './teamEvent';
import { endpointRecoverWorkflow } from './endpointRecover';

export {
  callbackRedeliverWorkflow,
  callbackRecoverWorkflow,
  episodeWorkflow,
  runHealthWorkflow,
  operatorAlertWorkflow,
  sweepWorkflow,
  digestWorkflow,
  digestResendWorkflow,
  interactionWorkflow,
  teamEventWorkflow,
  endpointRecoverWorkflow,
};

/** Fails to compile unless each workflow has the signature the contract gives its name (clients start it so). */
type Implements<T extends Workflows> = T;
export type RegisteredWorkflows = Implements<{
  episodeWorkflow: typeof episodeWorkflow;
  runHealthWorkflow: typeof runHealthWorkflow;
  operatorAlertWorkflow: typeof operatorAlertWorkflow;
  callbackRedeliverWorkflow: typeof callbackRedeliverWorkflow;
  callbackRecoverWorkflow: typeof callbackRecoverWorkflow;
  sweepWorkflow: typeof sweepWorkflow;
  digestWorkflow: typeof digestWorkflow;
  digestResendWorkflow: typeof digestResendWorkflow;
  interactionWorkflow: typeof interactionWorkflow;
  teamEventWorkflow: typeof teamEventWorkflow;
  endpointRecoverWorkflow: typeof endpointRecoverWorkflow;
}>;
