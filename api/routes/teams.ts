// The caller's team: its escalation policy (the rungs an open question climbs while nobody answers), which anyone in
// the team reads and only a team admin (the token's "roles": ["admin"]) replaces; and a member's removal (admins).
import Router from '@koa/router';
import { newCallbackSecret } from '../../runs/service';
import type { EscalationPolicyRow, EscalationPolicyStore } from '../../store/escalationPolicies';
import type { PushHoldStore } from '../../store/push/holds';
import type { NotificationPrefStore } from '../../store/push/notificationPrefs';
import type { PushSubscriptionStore } from '../../store/push/subscriptions';
import type { TeamRemovalStore } from '../../store/teamRemovals';
import { validate } from '../../platform/http/validate';
import { ConflictError } from '../../domain/errors';
import { requireAdmin, type AuthState } from '../auth';
import { escalationPolicyBody, memberParams } from '../schemas';

export interface TeamsRouterDeps {
  escalationPolicies: EscalationPolicyStore;
  /** What a member wrote under the team, ended by their removal. */
  members: {
    removals: Pick<TeamRemovalStore, 'record'>;
    prefs: Pick<NotificationPrefStore, 'removeMember'>;
    devices: Pick<PushSubscriptionStore, 'removeForTeam'>;
    holds: Pick<PushHoldStore, 'settleRemoved'>;
  };
  now: () => Date;
}

/** The policy as the API shows it: never its webhook secret. */
const publicPolicy = (row: EscalationPolicyRow | null) => ({
  rungs: row?.rungs ?? [],
  ...(row?.webhookUrl !== undefined ? { webhookUrl: row.webhookUrl } : {}),
  ...(row ? { updatedAt: row.updatedAt.toISOString(), updatedBy: row.updatedBy } : {}),
});

export function teamsRouter(deps: TeamsRouterDeps) {
  const router = new Router<AuthState>({ prefix: '/api/v1/teams/current' });

  const read = validate({ summary: "the caller's team's escalation policy (no rungs when it has none)" });
  router.get('/escalation', read, async (ctx) => {
    ctx.body = publicPolicy(await deps.escalationPolicies.get(ctx.state.caller.teamId));
  });

  const replace = validate({
    summary:
      "replaces the team's escalation policy (team admins only, 403 otherwise): at most 5 rungs within 7 days, " +
      'each {afterSeconds, to: "team" | "owner" | [userIds], via: "push" | "webhook"}; webhook rungs post a signed ' +
      'interaction.escalated event to webhookUrl, whose whsec_ secret is answered once, when first made',
    body: escalationPolicyBody,
    examples: [
      {
        rungs: [
          { afterSeconds: 900, to: 'owner', via: 'push' },
          { afterSeconds: 3600, to: 'team', via: 'push' },
          { afterSeconds: 14400, to: 'team', via: 'webhook' },
        ],
        webhookUrl: 'https://hooks.example.com/flow',
      },
    ],
  });
  const admins = requireAdmin('only a team admin may change the escalation policy');
  router.put('/escalation', admins, replace, async (ctx) => {
    const { caller } = ctx.state;
    const { row, secretCreated } = await deps.escalationPolicies.put(
      caller.teamId,
      ctx.state.input.body,
      caller.userId,
      deps.now(),
      newCallbackSecret,
    );
    ctx.body = { ...publicPolicy(row), ...(secretCreated ? { webhookSecret: row.webhookSecret } : {}) };
  });

  const rotate = validate({
    summary:
      "replaces the escalation webhook's whsec_ secret (team admins only), answered this once; rungs are signed " +
      'with both the new and the old one for CALLBACK_SECRET_OVERLAP_SECONDS (409 without a webhookUrl)',
  });
  router.post('/escalation/rotate-secret', admins, rotate, async (ctx) => {
    const { teamId } = ctx.state.caller;
    const policy = await deps.escalationPolicies.get(teamId);
    if (!policy?.webhookUrl) throw new ConflictError('the escalation policy has no webhookUrl');
    // A first PUT cut before it made the secret: its retry makes it, and tells it.
    const current = policy.webhookSecret;
    if (!current) throw new ConflictError('the webhook has no secret yet: PUT the policy again to make it');
    const secret = newCallbackSecret();
    if (!(await deps.escalationPolicies.rotateSecret(teamId, current, secret, deps.now())))
      throw new ConflictError('the webhook secret changed while it was rotated; rotate again');
    ctx.body = { secret };
  });

  const remove = validate({
    summary:
      'removes a member from the team (team admins only): their team-wide opt-in and prefs in the team, their ' +
      'devices registered in the team and the pushes held for their digest go, and the action tokens they were ' +
      "pushed before answer nothing (403); their sessions are the identity provider's to end. Idempotent",
    params: memberParams,
  });
  const removers = requireAdmin('only a team admin may remove a member');
  router.delete('/members/:userId', removers, remove, async (ctx) => {
    const { caller } = ctx.state;
    const { userId } = ctx.state.input.params;
    const { members } = deps;
    const now = deps.now();
    // First: a request cut after it has ended the tokens, and its retry ends the rest.
    await members.removals.record(caller.teamId, userId, caller.userId, now);
    const [{ teamWide }, devices, held] = await Promise.all([
      members.prefs.removeMember(userId, caller.teamId),
      members.devices.removeForTeam(caller.teamId, userId),
      members.holds.settleRemoved(caller.teamId, userId, now),
    ]);
    ctx.body = { userId, teamWide, devices, held };
  });

  return router;
}
