// The overview, kept current: the wallet's events arrive over the notifications
// websocket (opened with a ticket this browser's session asks for), and each burst of
// them fetches the page again and swaps in its fresh content. What changes without an
// event (the chain tip, the Ark server's state) is fetched once a minute. Without this
// script the page is still whole; it only stops updating.
"use strict";
(() => {
  const live = document.getElementById("live");
  if (!live) return;
  const say = (text) => { live.textContent = text; };
  let pending = null;
  let delay = 1000;

  const refresh = async () => {
    pending = null;
    try {
      const response = await fetch("/", { credentials: "same-origin" });
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.getElementById("overview");
      const shown = document.getElementById("overview");
      if (fresh && shown) shown.replaceWith(document.adoptNode(fresh));
    } catch (_) {
      // The box is restarting or out of reach: the socket's reconnect says so.
    }
  };
  const soon = () => {
    if (pending === null) pending = setTimeout(refresh, 300);
  };

  const connect = async () => {
    try {
      const response = await fetch("/console/live/ticket", { method: "POST", credentials: "same-origin" });
      if (!response.ok) throw new Error("no ticket: " + response.status);
      const ticket = await response.json();
      const scheme = location.protocol === "https:" ? "wss:" : "ws:";
      const url = scheme + "//" + location.host + "/api/v1/notifications/ws?ticket=" +
        encodeURIComponent(ticket) + "&types=" + encodeURIComponent(live.dataset.types);
      const socket = new WebSocket(url);
      socket.onopen = () => { delay = 1000; say("Live: updates as the wallet's events arrive."); soon(); };
      socket.onmessage = soon;
      socket.onclose = () => retry();
    } catch (_) {
      retry();
    }
  };
  const retry = () => {
    say("Not live: reconnecting…");
    setTimeout(connect, delay);
    delay = Math.min(delay * 2, 60000);
  };

  connect();
  setInterval(refresh, 60000);
})();
