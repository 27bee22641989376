// The Temporal activity context, when there is one: activity functions are also called directly (the API's push
// test route, benchmarks), and then there is nothing to heartbeat to.
import { Context } from '@temporalio/activity';

export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}
