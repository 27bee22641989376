// A team endpoint's test: the callback family's signed POST (the same guard, signature and deadline), to the
// endpoint's URL with its secrets; to a Slack endpoint, a Slack message, unsigned.
import { randomUUID } from 'node:crypto';
import { renderSlackMessage, slackFactsOf } from '../../domain/slackMessage';
import { teamEventBody } from '../../domain/teamEvents';
import { sendTestEvent, type CallbackSendDeps, type CallbackTestResult } from '../callback/send';

/** What a send needs of an endpoint. */
export interface EndpointTarget {
  _id: string;
  teamId: string;
  url: string;
  secret: string;
  previousSecret?: { secret: string; rotatedAt: Date };
  format: 'standard' | 'slack';
}

/**
 * One signed `endpoint.test` event with an id of its own, so a receiver's verifier can be checked before any run
 * event comes. Never retried.
 */
export function sendEndpointTest(
  deps: CallbackSendDeps & { studioUrl: string },
  endpoint: EndpointTarget,
): Promise<CallbackTestResult> {
  const id = `ev:test:${endpoint._id}:${randomUUID()}`;
  const body = teamEventBody(
    { id, type: 'endpoint.test', teamId: endpoint.teamId, data: { endpointId: endpoint._id } },
    null,
    0,
  );
  if (endpoint.format !== 'slack') return sendTestEvent(deps, endpoint, id, JSON.stringify(body));
  // About no run: the message names the test and links to the studio.
  const facts = {
    ...slackFactsOf(body, deps.studioUrl),
    runTitle: 'a test from Flow Notify',
    status: 'test',
  };
  return sendTestEvent(deps, endpoint, id, JSON.stringify(renderSlackMessage(facts)), 'unsigned');
}
