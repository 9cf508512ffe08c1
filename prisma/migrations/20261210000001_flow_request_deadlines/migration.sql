-- AlterTable
ALTER TABLE "FlowRequest" ADD COLUMN     "deadlineDoneAt" TIMESTAMP(3),
ADD COLUMN     "deadlineHandledAt" TIMESTAMP(3),
ADD COLUMN     "decideBy" TIMESTAMP(3),
ADD COLUMN     "decidedByDeadline" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "onTimeout" TEXT;

-- CreateIndex
CREATE INDEX "FlowRequest_state_decideBy_idx" ON "FlowRequest"("state", "decideBy");

