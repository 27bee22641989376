// The Temporal Cloud actions the benchmarks count from a history: Temporal Cloud's own list, applied to the
// recorded fixtures (whose every upsert is the SDK's TemporalChangeVersion, which Temporal Cloud does not bill).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { temporal } from '@temporalio/proto';
import { temporalActions } from '../../operator/actions';

const T = temporal.api.enums.v1.EventType;
const fixture = (name: string) =>
  historyFromJSON(JSON.parse(readFileSync(path.join(__dirname, '../fixtures', name), 'utf8'))).events ?? [];

const keyword = (value: string[]) => ({
  metadata: { encoding: Buffer.from('json/plain'), type: Buffer.from('KeywordList') },
  data: Buffer.from(JSON.stringify(value)),
});
const upsert = (fields: string[]): temporal.api.history.v1.IHistoryEvent => ({
  eventType: T.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
  upsertWorkflowSearchAttributesEventAttributes: {
    searchAttributes: { indexedFields: Object.fromEntries(fields.map((f) => [f, keyword(['x'])])) },
  },
});

describe('Temporal Cloud actions counted from a history', () => {
  it("an episode's: its start, one per workflow task of local activities, its activity and its child; not its patches' version upserts", () => {
    // Two patch markers, each with Core's TemporalChangeVersion upsert; three local activities in the first task
    // and one in the second; the push activity; the team event's child.
    assert.deepEqual(temporalActions(fixture('episode-history-team-event.json')), {
      total: 5,
      started: 1,
      localActivityTasks: 2,
      activities: 1,
      children: 1,
    });
  });

  it('an upsert of any other attribute is an action, whatever else it carries', () => {
    const counts = temporalActions([
      upsert(['TemporalChangeVersion']),
      upsert(['FlowOutcomeKind']),
      upsert(['TemporalChangeVersion', 'FlowRunId']),
    ]);
    assert.deepEqual(counts, { total: 2, searchAttributes: 2 });
  });
});
