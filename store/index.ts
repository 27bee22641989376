// Every store over one database, for the composition roots (worker.ts, api/server.ts) and tests.
import type { Db } from 'mongodb';
import { createClaimStore } from './claims';
import { createEpisodeStore } from './episodes';
import { createEventStore } from './events';
import { createInteractionStore } from './interactions';
import { createRunStore } from './runs';
import { createWatchStore } from './watches';

export interface StoreOptions {
  claimGraceSeconds: number;
  now?: () => Date;
}

export function createStores(db: Db, options: StoreOptions) {
  return {
    runs: createRunStore(db),
    events: createEventStore(db),
    interactions: createInteractionStore(db),
    watches: createWatchStore(db),
    claims: createClaimStore(db, { graceSeconds: options.claimGraceSeconds, now: options.now }),
    episodes: createEpisodeStore(db),
  };
}

export type Stores = ReturnType<typeof createStores>;
