// A persisted run for the pure rules' tests: a running run of team acme, owned by alice, with overrides.
import type { Run } from '../../domain/run';

export const AT = new Date('2026-11-30T09:00:00Z');

export const aRun = (over: Partial<Run> = {}): Run => ({
  _id: 'run_abc',
  teamId: 'acme',
  ownerId: 'alice',
  title: 'Deploy',
  status: 'running',
  pauseCount: 0,
  watchedIssueIds: [],
  createdAt: AT,
  updatedAt: AT,
  ...over,
});
