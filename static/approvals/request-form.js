// The request form: current values of the chosen line, only the chosen team's namespaces,
// added lines, dates of temporary grants. Loaded from a file: the CSP allows no inline script.
(function () {
  const data = JSON.parse(document.getElementById("current-values").textContent);
  const rows = document.getElementById("line-rows");
  const total = document.getElementById("id_lines-TOTAL_FORMS");
  const team = document.getElementById("id_team");

  function refresh(row) {
    const ns = row.querySelector("select[name$='-team_namespace']");
    const res = row.querySelector("select[name$='-resource']");
    const cell = row.querySelector("[data-current]");
    const info = data.namespaces[ns.value];
    // Only the resources with capacity on the namespace's cluster can be chosen.
    for (const option of res.options) {
      option.disabled = Boolean(info && option.value && !info.resources.includes(Number(option.value)));
    }
    const current = (data.current[ns.value] || {})[res.value];
    if (!ns.value || !res.value) { cell.textContent = "–"; return; }
    if (!current) { cell.textContent = "none yet"; return; }
    cell.textContent = current.guarantee + " / " + current.cap +
      (current.per_pod_max ? " (pod ≤ " + current.per_pod_max + ")" : "") +
      (current.priority_classes.length ? " [" + current.priority_classes.join(", ") + "]" : "");
    // Fill in the current values (an empty field keeps its value anyway); values filled in
    // for an earlier choice of namespace or resource follow the new choice.
    const fill = (suffix, value) => {
      const input = row.querySelector("input[name$='-" + suffix + "']");
      if (!input || (input.value !== "" && input.value !== input.dataset.filled)) return;
      input.value = value === null ? "" : value;
      input.dataset.filled = input.value;
    };
    fill("guarantee", current.guarantee);
    fill("cap", current.cap);
    const ticked = (suffix) => {
      const box = row.querySelector("input[name$='-" + suffix + "']");
      return Boolean(box && box.checked);
    };
    if (!ticked("remove_per_pod_max")) fill("per_pod_max", current.per_pod_max);
    const classes = row.querySelector("select[name$='-priority_classes']");
    const untouched = classes && (classes.selectedOptions.length === 0 || classes.dataset.filled);
    if (untouched && !ticked("any_priority_class")) {
      for (const option of classes.options) {
        option.selected = current.priority_classes.includes(option.value);
      }
      classes.dataset.filled = "1";
    }
  }

  function filterNamespaces() {
    // Namespaces are grouped by team slug; hide the groups of other teams.
    const chosen = team && team.selectedOptions.length ? team.value : "";
    for (const select of rows.querySelectorAll("select[name$='-team_namespace']")) {
      for (const option of select.querySelectorAll("option[value]")) {
        const info = data.namespaces[option.value];
        if (!info) continue;
        option.hidden = Boolean(chosen) && String(info.team) !== chosen;
      }
    }
  }

  rows.addEventListener("change", (event) => {
    const row = event.target.closest("tr.line-row");
    if (!row) return;
    if (event.target.matches("select[name$='-priority_classes']")) {
      delete event.target.dataset.filled;  // the user's own choice from now on
      return;
    }
    if (event.target.matches("select[name$='-team_namespace'], select[name$='-resource']")) {
      refresh(row);
    }
  });
  document.getElementById("add-line").addEventListener("click", () => {
    const index = Number(total.value);
    const html = document.getElementById("line-template").innerHTML.replaceAll("__prefix__", index);
    rows.insertAdjacentHTML("beforeend", html);
    total.value = index + 1;
    filterNamespaces();
  });
  if (team) team.addEventListener("change", filterNamespaces);

  const kinds = document.querySelectorAll("input[name='kind']");
  function toggleDates() {
    const temporary = Array.from(kinds).some((k) => k.checked && k.value === "temporary");
    for (const el of document.querySelectorAll(".temporary-only")) {
      el.classList.toggle("dim", !temporary);
    }
  }
  for (const k of kinds) k.addEventListener("change", toggleDates);
  toggleDates();
  filterNamespaces();
  for (const row of rows.querySelectorAll("tr.line-row")) refresh(row);
})();
