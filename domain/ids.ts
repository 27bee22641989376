// What a user or team id is: the shape tokens must carry, and what a request naming people (a rung's `to`) is held to.

/**
 * A user or team id longer than this, in UTF-8 bytes, is not an id: a digest's tag and id carry both ids on the wire
 * (digest|<team>|<user>), within the push payload's 3,800 bytes and Temporal's workflow id limit in any script.
 */
export const MAX_ID_BYTES = 256;
/** Control characters: escaped six times their size in JSON, and never part of a name. */
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;
/** What keys and workflow ids join a team and a user with: never inside either. */
export const ID_SEPARATOR = '|';

/** 1 to MAX_ID_BYTES bytes of UTF-8 without control characters (the separator is checked on its own). */
export const isId = (value: unknown): value is string =>
  typeof value === 'string' &&
  value.length > 0 &&
  new TextEncoder().encode(value).length <= MAX_ID_BYTES &&
  !CONTROL_CHARACTER.test(value);
