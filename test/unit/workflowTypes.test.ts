// Clients start workflows by the names in contract/workflows.ts: each must be a workflow the worker registers.
import assert from 'node:assert/strict';
import * as registered from '../../workflows';
import { workflowTypes } from '../../contract/workflows';

describe('workflow types', () => {
  it('every name a client starts is a workflow function workflows/index.ts exports, and each export is named', () => {
    const exported = Object.entries(registered)
      .filter(([, value]) => typeof value === 'function')
      .map(([name]) => name)
      .sort();
    assert.deepEqual(Object.values(workflowTypes).sort(), exported);
  });
});
