// Which workflow code a worker loads: a bundle given in, WORKFLOW_BUNDLE_DIR's, the build's, or the sources.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  TRACED_WORKFLOW_BUNDLE_FILE,
  WORKFLOW_BUNDLE_FILE,
  WORKFLOWS_PATH,
  workflowCode,
} from '../../worker';

describe('workflowCode', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(path.join(tmpdir(), 'bundle-dir-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('loads the bundle of WORKFLOW_BUNDLE_DIR, the traced one when traced', () => {
    writeFileSync(path.join(dir, WORKFLOW_BUNDLE_FILE), '');
    writeFileSync(path.join(dir, TRACED_WORKFLOW_BUNDLE_FILE), '');
    assert.deepEqual(workflowCode(false, undefined, dir), {
      workflowBundle: { codePath: path.join(dir, WORKFLOW_BUNDLE_FILE) },
    });
    assert.deepEqual(workflowCode(true, undefined, dir), {
      workflowBundle: { codePath: path.join(dir, TRACED_WORKFLOW_BUNDLE_FILE) },
    });
  });

  it('refuses a WORKFLOW_BUNDLE_DIR without the bundle it needs, naming the file', () => {
    writeFileSync(path.join(dir, WORKFLOW_BUNDLE_FILE), '');
    assert.throws(
      () => workflowCode(true, undefined, dir),
      /WORKFLOW_BUNDLE_DIR holds no workflow-bundle-traced\.js/,
    );
  });

  it('without a folder or a build beside it, bundles the sources', () => {
    const code = workflowCode(false, undefined, undefined);
    assert.ok('workflowsPath' in code, JSON.stringify(code));
    assert.equal(code.workflowsPath, WORKFLOWS_PATH);
  });

  it('a bundle given in wins', () => {
    assert.deepEqual(workflowCode(false, { code: 'x' }, dir), { workflowBundle: { code: 'x' } });
  });
});
