// Errors the domain raises; the API's error middleware maps each to its status code.
export class NotFoundError extends Error {
  override name = 'NotFoundError';
}

/** A request that conflicts with the current state (an illegal transition, an already answered interaction). */
export class ConflictError extends Error {
  override name = 'ConflictError';
}

/** Something that was valid once and no longer is (an expired action token). */
export class GoneError extends Error {
  override name = 'GoneError';
}

/** A caller who may no longer do this (a person removed from the team, holding a token minted before). */
export class ForbiddenError extends Error {
  override name = 'ForbiddenError';
}
