--[[
topo-aware placement through Slurm's cli_filter/lua (docs/placement.md, "Into Slurm: cli_filter").

Install: slurm.conf `CliFilterPlugins=cli_filter/lua`, and this file as `cli_filter.lua` beside
slurm.conf on every machine users submit from (sbatch, salloc and srun run it in their own
process, as the user, before the job reaches slurmctld).

A job that asks for placement gets the nodes `topo-aware place` chooses from the running Slurm's
free nodes: `--nodelist` pinned to them, or with `candidates` below an `--exclude` of everything
outside a larger candidate set, so Slurm still picks among good nodes when it starts the job.
A job asks with either (the environment wins; both work on every release from 20.02 on):
  TOPO_AWARE_PLACE=1            place by node count (-N) or GPU count (--gpus)
  TOPO_AWARE_PLACE=tp=8,pp=2    ... and score nodes for that parallel layout
  TOPO_AWARE_PLACE=0            never, whatever the comment says
  --comment 'topo-aware:place' or --comment 'topo-aware:place=tp=8,pp=2' (any other text around)

Fail-open: when the tool, the fabric or Slurm's state is missing, slow or wrong, the job is
submitted exactly as the user asked and ONE line on stderr says why. A filter that can stop a
submission would make topo-aware a new way for jobs to fail.

Site settings: edit the table below, or override per environment (TOPO_AWARE_TOOL,
TOPO_AWARE_CONFIG, TOPO_AWARE_FABRIC).
--]]

local site = {
	-- The command line tool (a path, or a name looked up in PATH).
	tool = "topo-aware",
	-- The plugin's configuration (`place --config`): its fabric, the nodes' captures.
	-- Empty: topo-aware.toml beside slurm.conf (SLURM_CONF's folder, else /etc/slurm).
	config = "",
	-- Seconds `topo-aware place` may take (scontrol included) before the job goes unplaced.
	timeout = 5,
	-- 0: pin the job to the chosen nodes (--nodelist). K > 0: exclude every node outside the K
	-- best candidates (--exclude), leaving Slurm the final choice among them.
	candidates = 0,
}

local function say(fmt, ...)
	io.stderr:write("topo-aware: place: " .. string.format(fmt, ...) .. "\n")
end

local function env(name)
	local v = os.getenv(name)
	if v == nil or v == "" then return nil end
	return v
end

-- One argument for /bin/sh, whatever it holds.
local function quote(s)
	return "'" .. string.gsub(s, "'", "'\\''") .. "'"
end

-- What the job asks: nil (nothing), or a table {layout = SPEC or nil, from = where it said so}.
local function request(options)
	local e = env("TOPO_AWARE_PLACE")
	if e ~= nil then
		if e == "0" or e == "no" or e == "false" then return nil end
		if e == "1" or e == "yes" or e == "true" then
			return { from = "TOPO_AWARE_PLACE" }
		end
		return { layout = e, from = "TOPO_AWARE_PLACE" }
	end
	local c = options["comment"]
	if c == nil then return nil end
	local layout = string.match(c, "topo%-aware:place=([^%s;]+)")
	if layout ~= nil then return { layout = layout, from = "--comment" } end
	local at = string.find(c, "topo-aware:place", 1, true)
	if at ~= nil then
		local after = string.sub(c, at + 16, at + 16)
		if after == "" or string.match(after, "[%s;,]") then
			return { from = "--comment" }
		end
	end
	return nil
end

-- What place reads the cluster from: the plugin's configuration (its fabric, the nodes'
-- captures, the calibration, read as a launch reads them), and TOPO_AWARE_FABRIC over its fabric.
-- Returns the arguments, or nil and why.
local function inputs()
	local args = {}
	local config = env("TOPO_AWARE_CONFIG") or site.config
	if config == "" then
		local conf = env("SLURM_CONF") or "/etc/slurm/slurm.conf"
		config = (string.match(conf, "^(.*)/[^/]*$") or ".") .. "/topo-aware.toml"
	end
	local fh = io.open(config, "r")
	if fh ~= nil then
		fh:close()
		table.insert(args, "--config")
		table.insert(args, config)
	end
	local fabric = env("TOPO_AWARE_FABRIC")
	if fabric ~= nil then
		table.insert(args, "--fabric")
		table.insert(args, fabric)
	end
	if #args == 0 then return nil, "cannot read " .. config end
	return args
end

-- The node count (-N N or N-N), else the GPU count (--gpus G): the two `place` takes.
local function size(options)
	local n = options["nodes"]
	if n ~= nil then
		local lo, hi = string.match(n, "^(%d+)%-(%d+)$")
		if lo == nil then lo = string.match(n, "^(%d+)$") hi = lo end
		-- Unset, Slurm reports "1-0" (min 1, no max): not a count the job asked for.
		if lo ~= nil and lo == hi then return { "-N", lo } end
		if lo ~= nil and hi ~= "0" then return nil, "a node range (-N " .. n .. ")" end
	end
	local g = options["gpus"]
	if g ~= nil and string.match(g, "^%d+$") then return { "--gpus", g } end
	return nil, "neither -N COUNT nor --gpus COUNT"
end

local function place(options, asked)
	if options["type"] == "srun" and env("SLURM_JOB_ID") ~= nil then
		return -- a step inside an allocation: its nodes are already chosen
	end
	for _, key in ipairs({ "nodelist", "exclude" }) do
		if options[key] ~= nil and options[key] ~= "" then
			return say("the job names its nodes (--%s): left as asked", key)
		end
	end
	local part = options["partition"]
	if part ~= nil and string.find(part, ",", 1, true) then
		return say("several partitions (%s): left as asked", part)
	end
	local count, why = size(options)
	if count == nil then return say("%s: left as asked", why) end
	local from, fwhy = inputs()
	if from == nil then return say("no configuration (%s): left as asked", fwhy) end

	local tool = env("TOPO_AWARE_TOOL") or site.tool
	local args = { tool, "place" }
	for _, a in ipairs(from) do table.insert(args, a) end
	for _, a in ipairs({ "--from-slurm", count[1], count[2], "--of", "sbatch" }) do
		table.insert(args, a)
	end
	if part ~= nil and part ~= "" then
		table.insert(args, "--partition")
		table.insert(args, part)
	end
	if asked.layout ~= nil then
		table.insert(args, "--layout")
		table.insert(args, asked.layout)
	end
	if site.candidates > 0 then
		table.insert(args, "--candidates")
		table.insert(args, tostring(site.candidates))
	end
	local cmd = "timeout -k 1 " .. tostring(site.timeout)
	for _, a in ipairs(args) do cmd = cmd .. " " .. quote(a) end
	-- Lua 5.1's close() gives no exit status: the shell prints it as the last line.
	local p = io.popen(cmd .. " 2>&1; echo \"topo-aware-rc=$?\"", "r")
	if p == nil then return say("cannot run %s: left as asked", tool) end
	local out = p:read("*a") or ""
	p:close()
	local rc = tonumber(string.match(out, "topo%-aware%-rc=(%d+)%s*$"))
	local line, said
	for l in string.gmatch(out, "[^\n]+") do
		if string.match(l, "^%-%-nodelist=") or string.match(l, "^%-%-exclude=") then
			line = l
		elseif not string.match(l, "^topo%-aware%-rc=") and said == nil then
			said = l
		end
	end
	if rc == 124 or rc == 137 then
		return say("no answer within %d s: left as asked", site.timeout)
	end
	if rc ~= 0 or line == nil then
		said = said or ("exit " .. tostring(rc))
		said = string.gsub(string.gsub(said, "^topo%-aware:?%s*", ""), "^place:%s*", "")
		return say("%s: left as asked", said)
	end
	-- One line of submission arguments: --nodelist=H, or --exclude=H with --switches=N. Only
	-- these are set; anything else on the line means a tool this script does not know.
	local set = {}
	for key, value in string.gmatch(line, "%-%-(%a+)=(%S+)") do
		if key ~= "nodelist" and key ~= "exclude" and key ~= "switches" then
			return say("unexpected answer '%s': left as asked", line)
		end
		set[key] = value
	end
	for key, value in pairs(set) do options[key] = value end
	if tonumber(options["verbose"] or "0") >= 1 then
		say("%s (asked by %s)", line, asked.from)
	end
end

function slurm_cli_pre_submit(options, offset)
	local asked = request(options)
	if asked ~= nil then
		-- Whatever goes wrong in here, the job goes on as asked.
		local ok, err = pcall(place, options, asked)
		if not ok then say("%s: left as asked", tostring(err)) end
	end
	return slurm.SUCCESS
end

function slurm_cli_setup_defaults(options, early_pass)
	return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
	return slurm.SUCCESS
end
