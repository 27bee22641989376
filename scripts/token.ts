// npm run token -- --user U --team T [--expires 7d] [--admin]: prints a bearer token for the local AUTH_JWT_SECRET
// (the environment's, else the one the embedded default generated under .data/). The API refuses tokens that
// live longer than AUTH_MAX_TOKEN_LIFETIME_SECONDS (7 days by default); AUTH_ISSUER / AUTH_AUDIENCE, when set, go in.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { mintToken } from '../api/auth';
import { launcherEnv } from '../config';
import { PROJECT_ROOT } from '../platform/embedded';

const { values } = parseArgs({
  options: {
    user: { type: 'string' },
    team: { type: 'string' },
    expires: { type: 'string', default: '7d' },
    // A team admin ("roles": ["admin"]): manages the team's escalation policy.
    admin: { type: 'boolean', default: false },
  },
});
if (!values.user || !values.team) {
  console.error('usage: npm run token -- --user <user id> --team <team id> [--expires 7d] [--admin]');
  process.exit(2);
}
const secretsFile = path.join(PROJECT_ROOT, '.data', 'secrets.json');
const secret =
  launcherEnv().authJwtSecret ??
  (existsSync(secretsFile)
    ? (JSON.parse(readFileSync(secretsFile, 'utf8')) as { authJwtSecret: string }).authJwtSecret
    : undefined);
if (!secret) {
  console.error(
    'no AUTH_JWT_SECRET set and no .data/secrets.json yet: run npm start once, or set AUTH_JWT_SECRET',
  );
  process.exit(1);
}
const { authIssuer: issuer, authAudience: audience } = launcherEnv();
mintToken(
  secret,
  values.user,
  values.team,
  values.expires,
  { issuer, audience },
  values.admin ? { roles: ['admin'] } : {},
).then(
  (token) => console.log(token),
  (err: Error) => {
    console.error(`--expires ${values.expires}: ${err.message} (e.g. 7d, 12h, 30m)`);
    process.exit(2);
  },
);
