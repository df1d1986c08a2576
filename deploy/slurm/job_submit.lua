-- gpuroom admission (job_submit/lua): every job that asks for GPUs (whole,
-- or shards of one through gres/shard) is held
-- at submission with AdminComment=gpuroom:admit, so that no GPU job starts
-- before gpuroom has ranked it and chosen where it may run. gpuroom (with
-- govern = true, mode = "control") releases each one with its priority,
-- partition and nodes in place. If gpuroom is stopped, new GPU jobs wait:
-- remove JobSubmitPlugins=lua (or this file) to give Slurm the queue back,
-- and release what waits with `scontrol release`.
-- Install: next to slurm.conf, with JobSubmitPlugins=lua in slurm.conf.

local function asks_gpus(job_desc)
   for _, field in ipairs({ "tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task", "gres" }) do
      local value = job_desc[field]
      if value ~= nil and (string.find(value, "gpu", 1, true) or string.find(value, "shard", 1, true)) then
         return true
      end
   end
   return false
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   if asks_gpus(job_desc) then
      job_desc.priority = 0
      job_desc.admin_comment = "gpuroom:admit"
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
