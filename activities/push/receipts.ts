// The receipt tokens of a fan-out: one per device still to reach, minted and stored (hashed) before any push carries
// them, so the device's service worker can report what became of its push. A retried fan-out mints afresh for the
// devices it still has to reach; the views merge a device's rows.
import type { PushPayload } from '../../domain/push';
import { hashActionToken, newActionToken } from '../../store/actionTokens';
import { RECEIPT_TOKEN_TTL_SECONDS, type PushReceiptRow } from '../../store/push/receipts';
import type { PushSubscriptionRow } from '../../store/push/subscriptions';
import type { PushActivityDeps } from './pushActivityDeps';

/** What the receipts of one send are about. */
export interface ReceiptScope {
  teamId: string;
  /** Empty for a digest. */
  runId: string;
  kind: string;
  /** When the run paused (a human-input push): pause → first shown is measured from it. */
  pausedAt?: Date;
}

/** Each pending device's payload with its own receipt token added (the same token form as an action's). */
export async function payloadsWithReceipts(
  deps: Pick<PushActivityDeps, 'pushReceipts' | 'now'>,
  episodeId: string,
  scope: ReceiptScope,
  pending: PushSubscriptionRow[],
  payloadFor: (sub: PushSubscriptionRow) => PushPayload,
): Promise<(sub: PushSubscriptionRow) => PushPayload> {
  const createdAt = deps.now();
  const expiresAt = new Date(createdAt.getTime() + RECEIPT_TOKEN_TTL_SECONDS * 1000);
  const tokens = new Map<string, string>();
  const rows: PushReceiptRow[] = pending.map((sub) => {
    const token = newActionToken();
    tokens.set(sub._id, token);
    return {
      _id: hashActionToken(token),
      ...scope,
      episodeId,
      userId: sub.userId,
      subscriptionId: sub._id,
      createdAt,
      expiresAt,
    };
  });
  await deps.pushReceipts.insertMany(rows);
  return (sub) => {
    const receipt = tokens.get(sub._id);
    return receipt ? { ...payloadFor(sub), receipt } : payloadFor(sub);
  };
}
