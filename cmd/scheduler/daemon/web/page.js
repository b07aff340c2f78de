// lockcron status page: the Trigger, Pause and Resume buttons call the
// admin API (POST /api/jobs/{name}/{action}), and a backfill's Cancel
// button DELETE /api/backfills/{id}, with the token kept in
// sessionStorage, say on the page what came of it, and the page's live
// part (<main id="live">) is re-fetched, with the token as a bearer token,
// and swapped in place every few seconds. When the daemon needs a token to
// show anything, the page arrives locked (no data, #locked): the token kept
// for the session, or the one entered in the box, fetches it at once. No
// framework, no build.
(function () {
  'use strict';

  var KEY = 'lockcron-admin-token';
  var body = document.body;
  var every = parseInt(body.dataset.refresh, 10) || 3000;
  var needToken = body.dataset.needToken === 'true';
  var msg = document.getElementById('msg');
  var tokenInput = document.getElementById('token');
  var tokenForm = document.getElementById('token-form');

  function storedToken() {
    try { return sessionStorage.getItem(KEY) || ''; } catch (e) { return ''; }
  }
  function storeToken(v) {
    try {
      if (v) { sessionStorage.setItem(KEY, v); } else { sessionStorage.removeItem(KEY); }
    } catch (e) { /* storage off: the input still holds it */ }
  }
  // token is the token in use: the one kept for the session. What is
  // typed in the box counts once it is used (Use, Enter, or a button), so
  // that a refresh never sends half a token.
  function token() { return storedToken(); }
  // useTyped keeps the token typed in the box for the session.
  function useTyped() {
    if (tokenInput) { storeToken(tokenInput.value.trim()); }
    return token();
  }

  if (tokenInput) { tokenInput.value = storedToken(); }
  function locked() { return !!document.getElementById('locked'); }
  // authHeaders are the headers of a request to the daemon: the bearer
  // token, if there is one.
  function authHeaders(accept, tok) {
    var h = { 'Accept': accept };
    if (tok) { h['Authorization'] = 'Bearer ' + tok; }
    return h;
  }

  // say shows a message: kind is 'ok', 'err' or 'info'.
  function say(text, kind) {
    msg.textContent = text;
    msg.className = 'msg ' + (kind || 'info');
    msg.hidden = !text;
  }

  var done = { trigger: 'triggered', pause: 'paused on every replica', resume: 'resumed on every replica',
    'cancel-backfill': 'backfill cancelled: no tick of it starts any more' };

  // pastOf is what a refused action did not do: "triggered", "paused", ...
  function pastOf(action) {
    return { trigger: 'triggered', 'cancel-backfill': 'cancelled' }[action] || action + 'd';
  }

  async function act(button) {
    var job = button.dataset.job, action = button.dataset.action;
    if (!job || !done[action]) { return; }
    var tok = useTyped();
    if (needToken && !tok) {
      say('Nothing sent: this daemon needs an admin token of scope operate or admin for ' + action + '. Enter it in the box at the top, then click again.', 'err');
      if (tokenInput) { tokenInput.focus(); }
      return;
    }
    var headers = authHeaders('application/json', tok);
    var body;
    var form = button.closest('form.trigger-form');
    if (action === 'trigger' && form) {
      // The job's parameters: the fields filled in (an empty one is left
      // out).
      var params = {};
      form.querySelectorAll('input[name]').forEach(function (i) {
        if (i.value !== '') { params[i.name] = i.value; }
      });
      body = JSON.stringify({ params: params });
      headers['Content-Type'] = 'application/json';
    }
    if (action === 'pause') {
      // A pause needs a note: why, shown with the pause and in the audit
      // trail. Cancel sends nothing.
      var note = window.prompt('Pause ' + job + ' on every replica. Why? (required; shown with the pause and in the audit trail)', '');
      if (note === null) { return; }
      body = JSON.stringify({ note: note });
      headers['Content-Type'] = 'application/json';
    }
    var url = '/api/jobs/' + encodeURIComponent(job) + '/' + action, method = 'POST';
    if (action === 'cancel-backfill') {
      // DELETE /api/backfills/{id}, once confirmed.
      if (!window.confirm('Cancel backfill ' + button.dataset.backfill + ' of ' + job + '? No tick of it starts after.')) { return; }
      url = '/api/backfills/' + encodeURIComponent(button.dataset.backfill);
      method = 'DELETE';
    }
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    say(job + ': ' + action + '…', 'info');
    try {
      var r = await fetch(url, {
        method: method, headers: headers, body: body, cache: 'no-store', credentials: 'same-origin'
      });
      var res = {};
      try { res = await r.json(); } catch (e) { /* not JSON */ }
      var why = res.error || ('HTTP ' + r.status + ' ' + r.statusText);
      if (r.ok) {
        var text = job + ': ' + done[action];
        if (action === 'trigger') {
          text = res.heard_by > 0
            ? job + ': triggered; ' + res.heard_by + ' replica(s) heard it, one runs it'
            : job + ': trigger sent, but no replica heard it, so nothing runs it';
        }
        say(text, res.heard_by === 0 ? 'err' : 'ok');
        refresh();
      } else if (r.status === 401) {
        say((tok ? 'Wrong token' : 'Token needed') + ': ' + job + ' was not ' + pastOf(action) +
          '. The admin API said: ' + why, 'err');
        if (tokenInput) { tokenInput.focus(); tokenInput.select(); }
      } else if (r.status === 403) {
        say('Refused: ' + job + ' was not ' + pastOf(action) + '. The admin API said: ' + why, 'err');
      } else if (r.status === 503) {
        say('Not yet: ' + why + '. Try again once the daemon is connected.', 'err');
      } else {
        say(job + ': ' + action + ' failed: ' + why, 'err');
      }
    } catch (e) {
      say(job + ': ' + action + ' not sent: the daemon does not answer (' + e.message + ')', 'err');
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }

  document.addEventListener('click', function (ev) {
    var b = ev.target.closest('button[data-action]');
    if (b && b.form) { ev.preventDefault(); } // a trigger form's: act sends it
    if (b && !b.disabled) { act(b); }
  });
  // Enter in a field of a trigger form sends it, as its button does.
  document.addEventListener('submit', function (ev) {
    var f = ev.target.closest('form.trigger-form');
    if (!f) { return; }
    ev.preventDefault();
    var b = f.querySelector('button[data-action]');
    if (b && !b.disabled) { act(b); }
  });

  // formState and restoreForms keep what is typed in the trigger forms,
  // and the focus, across a swap of the live part.
  function formState() {
    var st = { values: {}, focus: '' };
    live.querySelectorAll('form.trigger-form input[name]').forEach(function (i) {
      var k = i.form.dataset.job + '\n' + i.name;
      st.values[k] = i.value;
      if (i === document.activeElement) { st.focus = k; }
    });
    return st;
  }
  function restoreForms(st) {
    live.querySelectorAll('form.trigger-form input[name]').forEach(function (i) {
      var k = i.form.dataset.job + '\n' + i.name;
      if (Object.prototype.hasOwnProperty.call(st.values, k)) { i.value = st.values[k]; }
      if (k === st.focus) { i.focus(); }
    });
  }

  // refresh swaps in the live part of a fresh copy of this page, if it
  // changed: one request at a time, none while the tab is hidden.
  var live = document.getElementById('live');
  var busy = false, again = false, timer = 0, lastOK = new Date();
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    clearTimeout(timer);
    try {
      var r = await fetch(location.href, { headers: authHeaders('text/html', token()), cache: 'no-store' });
      var type = r.headers.get('Content-Type') || '';
      if (type.indexOf('text/html') !== 0) { throw new Error('HTTP ' + r.status); }
      var doc = new DOMParser().parseFromString(await r.text(), 'text/html');
      var fresh = doc.getElementById('live');
      if (fresh && fresh.innerHTML !== live.innerHTML) {
        var st = formState();
        live.innerHTML = fresh.innerHTML;
        restoreForms(st);
      }
      if (doc.title) { document.title = doc.title; }
      var rep = doc.getElementById('replica'), here = document.getElementById('replica');
      if (rep && here && rep.textContent !== here.textContent) { here.textContent = rep.textContent; }
      if (r.status === 401 && token()) {
        say('Wrong token: the daemon did not take it. Enter another in the box at the top.', 'err');
      } else if (r.status !== 401 && msg.textContent.indexOf('Wrong token: the daemon') === 0) {
        say('', 'info');
      }
      lastOK = new Date();
    } catch (e) {
      var stale = document.getElementById('stale');
      if (stale) { stale.textContent = 'Not updated since ' + lastOK.toLocaleTimeString() + ': the daemon does not answer (' + e.message + ').'; }
    } finally {
      busy = false;
      if (again) { again = false; refresh(); } else { timer = setTimeout(tick, every); }
    }
  }
  function tick() {
    // Hidden, or locked with no token to try: nothing to fetch.
    if (document.hidden || (locked() && !token())) { timer = setTimeout(tick, every); return; }
    refresh();
  }
  document.addEventListener('visibilitychange', function () { if (!document.hidden) { refresh(); } });

  if (tokenForm) {
    tokenForm.addEventListener('submit', function (ev) {
      ev.preventDefault();
      if (!useTyped()) { say('Enter a token first.', 'err'); tokenInput.focus(); return; }
      say('', 'info');
      refresh();
    });
  }
  if (locked() && token()) {
    refresh(); // the token kept for the session: no need to ask again
  } else {
    if (locked() && tokenInput) { tokenInput.focus(); }
    timer = setTimeout(tick, every);
  }
})();
