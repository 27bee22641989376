// A digest's id: unique across every digest a person is ever sent, whatever run ids the Temporal server makes.
import assert from 'node:assert/strict';
import { digestSendId, digestWorkflowId } from '../../contract/workflows';

describe("a digest's id", () => {
  it('differs between two executions started within the same minute on a server that makes time-ordered run ids', () => {
    const workflowId = digestWorkflowId('acme', 'uma');
    // UUIDv7 run ids (Temporal Server 1.32 makes them for starts): the first 48 bits are the millisecond clock,
    // so two executions started within 65 s of each other share their first 8 characters.
    const first = '01a2507a-3ec5-7061-8f00-6c1b2d3e4f50';
    const second = '01a2507a-7d12-7a4e-9c31-0a9b8c7d6e5f';
    assert.notEqual(digestSendId(workflowId, first, 1), digestSendId(workflowId, second, 1));
    assert.notEqual(digestSendId(workflowId, first, 1), digestSendId(workflowId, first, 2));
    assert.equal(digestSendId(workflowId, first, 1), digestSendId(workflowId, first, 1));
  });
});
