// What the activities share: the Temporal activity context, when there is one (activity functions are also called
// directly: the API's push test route, benchmarks).
import { Context } from '@temporalio/activity';

export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}
