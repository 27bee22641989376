// flowKv: a one-table IndexedDB key/value store shared by the page and the service worker. The worker has no
// localStorage, and it needs the signed-in user's token to re-register a rotated push subscription
// (pushsubscriptionchange) when no studio tab is open — the usual moment a browser rotates one.
// Loaded with <script> by index.html and with importScripts() by sw.js; defines self.flowKv. A classic
// script, not an ES module: importScripts() cannot load a module.
(function (scope) {
  'use strict';
  var DB_NAME = 'flow-studio';
  var STORE = 'kv';

  function open() {
    return new Promise(function (resolve, reject) {
      var request = indexedDB.open(DB_NAME, 1);
      request.onupgradeneeded = function () {
        request.result.createObjectStore(STORE);
      };
      request.onsuccess = function () {
        resolve(request.result);
      };
      request.onerror = function () {
        reject(request.error);
      };
    });
  }

  function run(mode, operation) {
    return open().then(function (db) {
      return new Promise(function (resolve, reject) {
        var tx = db.transaction(STORE, mode);
        var request = operation(tx.objectStore(STORE));
        tx.oncomplete = function () {
          db.close();
          resolve(request.result);
        };
        tx.onerror = tx.onabort = function () {
          db.close();
          reject(tx.error);
        };
      });
    });
  }

  scope.flowKv = {
    get: function (key) {
      return run('readonly', function (store) {
        return store.get(key);
      });
    },
    set: function (key, value) {
      return run('readwrite', function (store) {
        return store.put(value, key);
      });
    },
    delete: function (key) {
      return run('readwrite', function (store) {
        return store.delete(key);
      });
    },
  };
})(self);
